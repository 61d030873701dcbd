from openai import AsyncOpenAI

from memlane.client import AsyncClient

memlane = AsyncClient()  # the same methods as Client, awaited
llm = AsyncOpenAI()


async def reply(user_id: str, chat_id: str, messages: list[dict]) -> str:
    found = await memlane.context(user_id, messages[-1]["content"], budget_tokens=2000)
    system = {"role": "system", "content": f"You are a helpful assistant.\n\n{found.context}"}
    answer = await llm.chat.completions.create(model="gpt-4o-mini", messages=[system, *messages])
    messages.append({"role": "assistant", "content": answer.choices[0].message.content})
    await memlane.enqueue({"conversation_id": chat_id, "user_id": user_id, "messages": messages})
    return messages[-1]["content"]
