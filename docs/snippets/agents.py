from memlane.client import Client

messages = [
    {"role": "user", "content": "Call me Sam. I live in Porto."},
    {"role": "assistant", "content": "Noted, Sam."},
]

with Client() as memlane:
    # the conversation names the agent the user talks to
    done = memlane.enqueue(
        {"conversation_id": "tutor-1", "user_id": "maya", "agent_id": "tutor",
         "messages": messages, "final": True}
    )  # fmt: skip
    memlane.wait(done.job_ids)  # only for this example: in an app, extraction runs behind
    # as the tutor: maya's shared memories ("lives in Porto") and the tutor's own ("Sam")
    context = memlane.context("maya", "how do I greet her?", agent_id="tutor")
    scopes = {item.id: item.scope for item in context.pack.items}  # "user" or "agent:tutor"
    own = memlane.list_memories("maya", agent_id="tutor").memories
    # as another agent: the shared memories only
    coach = memlane.context("maya", "how do I greet her?", agent_id="coach").context
