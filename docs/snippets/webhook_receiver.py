# A webhook receiver's check of each delivery: the signature, then the event id.
from memlane.client.webhooks import SignatureError, verify

SECRET = "the secret `memlane webhooks add` printed"
seen: set[str] = set()  # a real receiver keeps this in its database


def receive(body: bytes, signature: str | None) -> int:
    """The HTTP status to answer a delivery with (`body`: the raw bytes received)."""
    try:
        event = verify(body, signature, secret=SECRET)  # 300 s replay window by default
    except SignatureError:
        return 400
    if event["id"] in seen:  # at least once: a retry repeats the event id
        return 200
    seen.add(event["id"])
    print(event["type"], event["user_id"], event["data"])
    return 200
