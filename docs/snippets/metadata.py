from memlane import Memlane

lane = Memlane.from_settings()
lane.enqueue(
    {
        "conversation_id": "c1",
        "user_id": "u1",
        "final": True,
        "metadata": {"team": "eng", "project": "atlas", "day": "2026-01-31"},
        "messages": [
            {"role": "user", "content": "We chose PostgreSQL for the atlas project."},
            {"role": "assistant", "content": "Noted."},
        ],
    }
)
lane.add_memory("u1", {"content": "User runs the support rota.", "metadata": {"team": "ops"}})
lane.flush()  # the embedded default's worker: what the transcript taught is stored
atlas = lane.assemble("u1", "which database did we choose?", filter={"project": "atlas"})
eng = lane.list_memories("u1", filter={"team": {"in": ["eng"]}})
recent = lane.search("u1", "database", filter={"day": {"gte": "2026-01-01"}})
not_ops = lane.list_memories("u1", filter={"not": {"team": "ops"}})  # untagged ones too
lane.close()
