"""The store of conversations and their jobs: messages stored durably, job rows and their
windows, and deleting a conversation."""
