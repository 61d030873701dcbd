from memlane.client import Client  # AsyncClient: the same methods, awaited

user_id, chat_id = "maya", "chat-1"
messages = [
    {"role": "user", "content": "I live in Porto and I prefer window seats."},
    {"role": "assistant", "content": "Noted: Porto, window seats."},
]

with Client() as memlane:  # or Client("http://127.0.0.1:8000", api_key="...")
    # after each turn: the messages list you already send to your model, as it is
    done = memlane.enqueue(
        {"conversation_id": chat_id, "user_id": user_id, "messages": messages, "final": True}
    )
    memlane.wait(done.job_ids)  # only for this example: in an app, extraction runs behind
    # before each model call: the user's memories that matter, within a token budget
    block = memlane.context(user_id, "where does she live?", budget_tokens=2000).context
    hits = memlane.search(user_id, "where does she live?", limit=5)  # memories, their scores
    page = memlane.list_memories(user_id, limit=100)  # page.memories, page.next_cursor
    everything = list(memlane.iter_memories(user_id))  # follows the cursors for you
    memlane.pin(user_id, hits[0].memory.id)
    history = memlane.memory_history(user_id, hits[0].memory.id)  # created, pinned, …
    memlane.forget(user_id, hits[0].memory.id)  # never in a context again
