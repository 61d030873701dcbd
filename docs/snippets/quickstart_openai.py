from openai import OpenAI

from memlane.client import Client

memlane = Client()  # MEMLANE_CLIENT_URL (default http://127.0.0.1:8000) and MEMLANE_CLIENT_KEY
llm = OpenAI()


def reply(user_id: str, chat_id: str, messages: list[dict]) -> str:
    """One turn of your chat app, with memory; `messages` is the list you already keep."""
    # before the model call: what this user said before that matters now, within a budget
    memory = memlane.context(user_id, messages[-1]["content"], budget_tokens=2000).context
    system = {"role": "system", "content": f"You are a helpful assistant.\n\n{memory}"}
    answer = llm.chat.completions.create(model="gpt-4o-mini", messages=[system, *messages])
    messages.append({"role": "assistant", "content": answer.choices[0].message.content})
    # after the turn: the conversation as you hold it; memlane's workers extract memories
    memlane.enqueue({"conversation_id": chat_id, "user_id": user_id, "messages": messages})
    return messages[-1]["content"]
