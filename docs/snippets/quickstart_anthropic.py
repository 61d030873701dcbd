from anthropic import Anthropic

from memlane.client import Client

memlane = Client()  # MEMLANE_CLIENT_URL (default http://127.0.0.1:8000) and MEMLANE_CLIENT_KEY
llm = Anthropic()


def reply(user_id: str, chat_id: str, messages: list[dict]) -> str:
    """One turn of your chat app, with memory; `messages` is the list you already keep."""
    memory = memlane.context(user_id, messages[-1]["content"], budget_tokens=2000).context
    answer = llm.messages.create(
        model="claude-3-5-haiku-latest",
        max_tokens=1024,
        system=f"You are a helpful assistant.\n\n{memory}",
        messages=messages,
    )
    messages.append({"role": "assistant", "content": answer.content[0].text})
    memlane.enqueue({"conversation_id": chat_id, "user_id": user_id, "messages": messages})
    return messages[-1]["content"]
