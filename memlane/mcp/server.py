"""The MCP front door: memlane as a Model Context Protocol server (the official `mcp`
SDK's MCPServer), over stdio or streamable HTTP. `memlane mcp --user maya` runs it.

Tools: remember (one fact, or a transcript to extract from), recall (the context block
for a query, within a budget), search, list_memories, pin, forget; and one resource, the
served user's memories. Each tool acts on the server's user (`--user`, or
MEMLANE_MCP_USER) unless given `user_id`:
- over stdio that is the only user there is: another `user_id` is not found, so a model
  can read and change that user's memories and no one else's;
- over HTTP every request carries an API key (the HTTP API's keys and rule,
  memlane.service.keys) and a tool reaches the users that key reaches (another is not
  found, as over the HTTP API) with the scopes it holds (read tools need `read`, the
  others `write`); the server's user, if any, is the default. Rate limits apply per key.
The server binds 127.0.0.1 unless told otherwise.

Each tool calls the facade in a worker thread (the SDK runs plain functions so); memlane's
own errors reach the model as tool errors carrying their message, which says what to do.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from collections.abc import Callable, Sequence
from importlib.metadata import version
from typing import Annotated, Any, Literal, ParamSpec, TypeVar
from urllib.parse import quote

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError
from starlette.types import ASGIApp

from memlane.mcp.access import RequireKey, user_for
from memlane.models.schemas import MemoryPage, MemoryPublic, SearchHit
from memlane.pipeline.errors import MemlaneError, problems_of
from memlane.pipeline.records import Category, Tier
from memlane.service.facade import Memlane
from memlane.service.keys.keyring import Keyring
from memlane.service.keys.rate_limit import RateLimiter

P = ParamSpec("P")
R = TypeVar("R")

RESOURCE_LIMIT = 500  # memories the resource holds, newest first
# The set is a setting: the schema names where it is, the server refuses another (a tool error).
CategoryIn = Annotated[
    Category,
    Field(
        description="one of the configured categories (MEMLANE_CATEGORIES: preference, fact, "
        "decision, project unless set)"
    ),
]
INSTRUCTIONS = (
    "Long-term memory of one user (memlane). Call `recall` with the user's message before "
    "answering to get what you know about them, within a token budget. Call `remember` "
    "with a fact the user stated about themselves (one sentence), or with the "
    "conversation's messages to have memlane extract what matters. Memory ids in recalled "
    "contexts (short numbers) work in `pin` and `forget`. Forget what the user asks you to "
    "forget; it is not learned again."
)


class RememberOut(BaseModel):
    """What `remember` did: a fact `stored` or already `known` (its memory), or a
    transcript `enqueued` for extraction (its conversation and jobs)."""

    outcome: Literal["stored", "known", "enqueued"]
    memory: MemoryPublic | None = None
    conversation_id: str | None = None
    stored_messages: int | None = None
    job_ids: list[str] = Field(default_factory=list)


class _Server(MCPServer):
    """MCPServer whose refused arguments read like memlane's other errors: the SDK
    validates a tool's arguments before the tool runs and words a refusal as pydantic's
    dump ("1 validation error for recallArguments …")."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(
                    f"invalid arguments for {name}: {problems_of(exc.__cause__)}"
                ) from exc.__cause__
            raise


def conversation_id_of(messages: Sequence[Any], system: Any) -> str:
    """The conversation id of `messages` sent without one: derived from their content,
    so the same messages remembered again land in the same conversation (stored once,
    extracted once) instead of making a new one each time."""
    canonical = json.dumps(
        {"messages": list(messages), "system": system},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return "mcp-" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _tool_errors(function: Callable[P, R]) -> Callable[P, R]:
    """memlane's errors and invalid values as ToolErrors: the model reads the message
    (a ToolError's text reaches it; any other exception reaches it as a bare failure)."""

    @functools.wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except ValidationError as exc:
            raise ToolError(problems_of(exc)) from exc
        except (MemlaneError, ValueError) as exc:
            raise ToolError(str(exc)) from exc

    return call


def resource_uri(user_id: str) -> str:
    return f"memlane://users/{quote(user_id, safe='')}/memories"


def _without_user(function: Callable[P, R]) -> Callable[P, R]:
    """`function` as the SDK sees it without its `user_id` and `agent_id` parameters
    (stdio: the tools take no user, the server's is the only one, and act as the
    server's agent)."""
    signature = inspect.signature(function, eval_str=True)
    kept = [p for name, p in signature.parameters.items() if name not in ("user_id", "agent_id")]
    function.__signature__ = signature.replace(parameters=kept)  # type: ignore[attr-defined]
    return function


def build_server(
    lane: Memlane,
    user_id: str | None,
    *,
    per_key: bool = False,
    log_level: str = "WARNING",
    agent_id: str | None = None,
) -> MCPServer:
    """The MCP server over `lane`. `per_key` (HTTP): each tool takes `user_id`, any user
    the caller's key reaches, `user_id` (if any) the default; else (stdio) the tools
    take no user and act on `user_id`'s memories only. `agent_id`: the agent the server
    is (memlane.pipeline.scope): conversations handed over are with it, and reads see the
    user's shared memories and its own; per key, a tool's `agent_id` may name another."""
    default = user_id
    default_agent = agent_id
    if not per_key and user_id is None:
        raise ValueError("a server without keys serves one user: name it")
    fit: Callable[[Callable[P, R]], Callable[P, R]] = (
        (lambda function: function) if per_key else _without_user
    )
    server: MCPServer = _Server(
        "memlane",
        version=version("memlane"),
        instructions=INSTRUCTIONS,
        log_level=log_level,  # type: ignore[arg-type]
    )
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=writes)
    @fit
    @_tool_errors
    def remember(
        fact: str | None = None,
        messages: list[dict[str, Any]] | None = None,
        category: CategoryIn = "fact",
        importance: Annotated[float, Field(ge=0.0, le=1.0)] = 0.7,
        conversation_id: str | None = None,
        system: str | list[dict[str, Any]] | None = None,
        metadata: dict[str, Any] | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        ctx: Context = None,  # type: ignore[assignment]  # the SDK passes it
    ) -> RememberOut:
        """Remember one fact about the user (`fact`: one sentence, stored now; a fact
        already known is confirmed, not stored twice), or hand over conversation `messages` (OpenAI
        or Anthropic format, as sent to the model) for memlane to extract memories from
        in the background. Give one of the two; with `messages`, Anthropic's top-level
        `system` (a string or text blocks) may go beside them. The same messages sent
        again are recognised and stored once; give `conversation_id` to send a growing
        conversation. `metadata`: a JSON object (string keys; strings, numbers, booleans
        or lists of them) the fact, or what is learned from the messages, carries, for
        `filter` to select on."""
        user_id = user_for(ctx, user_id, default, "write")
        if (fact is None) == (messages is None):
            raise ToolError("give either `fact` (one sentence) or `messages`, not both or none")
        if system is not None and messages is None:
            raise ToolError("`system` goes with `messages` (the conversation it began)")
        if fact is not None:
            done = lane.remember(
                user_id,
                {
                    "content": fact,
                    "category": category,
                    "importance": importance,
                    **({"metadata": metadata} if metadata is not None else {}),
                },
            )
            return RememberOut(outcome=done.outcome, memory=done.memory)
        # Unless named, the conversation is the messages' own (an id from their content):
        # the same messages remembered again store nothing and extract nothing, so a
        # re-read never counts as a confirmation. Different messages get another id, as
        # memlane reads a transcript without message ids as a conversation from its first
        # message. Final: extract now, not after 5 more replies.
        result = lane.enqueue(
            {
                "conversation_id": conversation_id or conversation_id_of(messages or [], system),
                "user_id": user_id,
                "messages": messages,
                "final": True,
                **({"system": system} if system is not None else {}),
                **({"agent_id": agent} if (agent := agent_id or default_agent) else {}),
                **({"metadata": metadata} if metadata is not None else {}),
            }
        )
        return RememberOut(
            outcome="enqueued",
            conversation_id=result.conversation_id,
            stored_messages=result.stored_messages,
            job_ids=result.job_ids,
        )

    @server.tool(annotations=reads)
    @fit
    @_tool_errors
    def recall(
        query: str,
        budget_tokens: Annotated[int, Field(ge=50, le=100_000)] = 2000,
        filter: dict[str, Any] | None = None,  # the word of every door
        user_id: str | None = None,
        agent_id: str | None = None,
        ctx: Context = None,  # type: ignore[assignment]
    ) -> str:
        """What memlane knows about the user that matters for `query` (the user's
        message, say), as an XML block of at most `budget_tokens` tokens: identity, the
        most relevant memories with ids and dates, past episodes, procedures. `filter`:
        only memories and episodes whose metadata passes it, e.g. {"team": "eng"}."""
        user_id = user_for(ctx, user_id, default, "read")
        agent = agent_id or default_agent
        return lane.assemble(
            user_id, query, budget_tokens=budget_tokens, agent_id=agent, filter=filter
        ).text

    @server.tool(annotations=reads)
    @fit
    @_tool_errors
    def search(
        query: str,
        limit: Annotated[int, Field(ge=1, le=200)] = 10,
        category: CategoryIn | None = None,
        tier: Tier | None = None,
        min_score: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0,
        filter: dict[str, Any] | None = None,  # the word of every door
        user_id: str | None = None,
        agent_id: str | None = None,
        ctx: Context = None,  # type: ignore[assignment]
    ) -> list[SearchHit]:
        """The user's memories for `query`, best first, each with its score and the
        score's parts (relevance, importance, recency, frequency); `filter`: only those
        whose metadata passes it."""
        user_id = user_for(ctx, user_id, default, "read")
        return lane.search(
            user_id,
            query,
            limit=limit,
            category=category,
            tier=tier,
            min_score=min_score,
            agent_id=agent_id or default_agent,
            filter=filter,
        )

    @server.tool(annotations=reads)
    @fit
    @_tool_errors
    def list_memories(
        limit: Annotated[int, Field(ge=1, le=1000)] = 50,
        cursor: str | None = None,
        status: Literal["active", "superseded", "quarantined", "deleted"] = "active",
        filter: dict[str, Any] | None = None,  # the word of every door
        user_id: str | None = None,
        agent_id: str | None = None,
        ctx: Context = None,  # type: ignore[assignment]
    ) -> MemoryPage:
        """The user's memories, newest first, a page at a time: pass `next_cursor` as
        `cursor` for the next page (null on the last); `filter`: only those whose
        metadata passes it."""
        user_id = user_for(ctx, user_id, default, "read")
        agent = agent_id or default_agent
        return lane.memories_page(
            user_id, status=status, limit=limit, cursor=cursor, agent_id=agent, filter=filter
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True))
    @fit
    @_tool_errors
    def pin(
        memory_id: str,
        user_id: str | None = None,
        ctx: Context = None,  # type: ignore[assignment]
    ) -> MemoryPublic:
        """Pin a memory (its id, or the short number a recalled context shows): always in
        recalled contexts from now on."""
        return lane.pin(user_for(ctx, user_id, default, "write"), memory_id)

    @server.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True
        )
    )
    @fit
    @_tool_errors
    def forget(
        memory_id: str,
        user_id: str | None = None,
        ctx: Context = None,  # type: ignore[assignment]
    ) -> MemoryPublic:
        """Forget a memory (its id, or the short number a recalled context shows) when
        the user asks: never recalled again, and not learned again from later
        conversations. The user can restore it; it is not deleted."""
        return lane.forget(user_for(ctx, user_id, default, "write"), memory_id)

    if user_id is None:  # no default user: the tools take one, there is no resource
        return server

    @server.resource(
        resource_uri(user_id),
        name="memories",
        title=f"{user_id}'s memories",
        description=f"The user's active memories, newest first (at most {RESOURCE_LIMIT}), as JSON",
        mime_type="application/json",
    )
    def memories() -> str:
        page = lane.memories_page(user_id, status="active", limit=RESOURCE_LIMIT)
        return json.dumps([m.model_dump(mode="json") for m in page.memories], indent=1)

    return server


def http_app(
    server: MCPServer,
    *,
    keyring: Keyring,
    limiter: RateLimiter | None = None,
    host: str,
    path: str,
) -> ASGIApp:
    """The streamable HTTP app at `path`, behind the keys. For a loopback `host` the SDK
    also refuses requests whose Host or Origin header is not loopback (DNS rebinding)."""
    app = server.streamable_http_app(streamable_http_path=path, host=host)
    return RequireKey(app, keyring, limiter)
