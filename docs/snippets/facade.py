from memlane import Memlane

lane = Memlane.from_settings()  # MEMLANE_* settings; none set: SQLite memlane.db, no services
lane.enqueue(
    {
        "conversation_id": "c1",
        "user_id": "u1",
        "final": True,
        "messages": [
            {"role": "user", "content": "I prefer metric units."},
            {"role": "assistant", "content": "Metric it is."},
        ],
    }
)
fact = lane.remember("u1", "User works at a bakery in Porto.")  # stored now, or known
ctx = lane.assemble("u1", "where does the user work?", budget_tokens=2000)
prompt = ctx.text  # the XML block, within budget
pack = ctx.pack  # what was kept, dropped and why
memory_id = fact.memory.id
lane.pin("u1", memory_id)
lane.update_memory("u1", memory_id, content="User works at a bakery in Lisbon.", expires_at=None)
history = lane.memory_history("u1", memory_id)  # [MemoryEvent(kind, actor, at, detail), …]
hits = lane.search("u1", "bakery", limit=5)  # memories with their scores, no budget
page = lane.memories_page("u1", limit=100, cursor=None)  # newest first; .next_cursor
lane.forget("u1", memory_id)  # never in a context again; lane.retry_job("job_…") for jobs
lane.close()
