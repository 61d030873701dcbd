"""`memlane mcp`: serve one user's memories over the Model Context Protocol
(memlane.mcp.server), on stdio for a desktop client or on streamable HTTP."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from memlane.cli.common import USAGE_EXIT, fail, lane_session


def mcp(
    user: Annotated[
        str | None,
        typer.Option(
            "--user",
            help="The user whose memories the server serves (default MEMLANE_MCP_USER). "
            "Over stdio no tool can pick another; over HTTP it is the tools' default user, "
            "and a tool's user_id may name any user the caller's key reaches.",
            show_default=False,
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            help="The agent this server is: conversations handed over are with it, and "
            "reads see the user's shared memories and its own.",
            show_default=False,
        ),
    ] = None,
    transport: Annotated[
        Literal["stdio", "http"],
        typer.Option(help="stdio (a client starts this command) or streamable HTTP."),
    ] = "stdio",
    host: Annotated[str, typer.Option(help="HTTP: the interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="HTTP: the port.")] = 8765,
    path: Annotated[str, typer.Option(help="HTTP: the endpoint's path.")] = "/mcp",
    allow_unauthenticated: Annotated[
        bool,
        typer.Option(
            "--allow-unauthenticated",
            help="HTTP: listen on a non-loopback address without MEMLANE_API_KEYS; also "
            "MEMLANE_ALLOW_UNAUTHENTICATED=true.",
        ),
    ] = False,
) -> None:
    """Serve users' memories over MCP: remember, recall, search, list_memories, pin and
    forget, and the user's memories as a resource. Over stdio, the --user's only. Over
    HTTP, API keys (stored ones, or MEMLANE_API_KEYS) are required as bearer tokens
    whenever any exists, and each tool reaches the users the caller's key reaches; on an
    address other than loopback keys must exist (MEMLANE_API_KEYS, or stored ones) or
    --allow-unauthenticated be given."""
    from memlane.config import startup
    from memlane.config.settings import load_settings
    from memlane.service.input_checks import check_text

    settings = load_settings()
    user_id = user or settings.mcp_user
    if not user_id and transport == "stdio":
        fail("name the user: --user U, or MEMLANE_MCP_USER", USAGE_EXIT)
    if user_id:
        user_id = check_text(user_id, "user_id")  # read as every door reads it: stripped
    if agent is not None:
        agent = check_text(agent, "agent_id")
    if transport == "http":
        if not (startup.is_loopback(host) or settings.api_keys):
            from memlane.service.keys.keyring import stored_keys_guard

            # keys made with `memlane keys create` close the server as MEMLANE_API_KEYS does
            allow_unauthenticated = allow_unauthenticated or stored_keys_guard(
                settings.resolved_database_url
            )
        startup.require_auth(
            settings,
            host,
            "memlane mcp",
            allowed=allow_unauthenticated or settings.allow_unauthenticated,
        )
    typer.echo(
        startup.start_line(settings, f"mcp ({transport}, user {user_id or 'per key'})"), err=True
    )
    from memlane.mcp.server import build_server, http_app
    from memlane.service.keys.keyring import Keyring
    from memlane.service.keys.rate_limit import RateLimiter

    level = "DEBUG" if settings.log_level == "DEBUG" else "WARNING"
    with lane_session() as lane:
        lane.actor = "mcp"  # who memories' histories say made the changes
        server = build_server(
            lane, user_id, per_key=transport == "http", log_level=level, agent_id=agent
        )
        if transport == "stdio":
            server.run("stdio")
            return
        import uvicorn

        keyring = Keyring(
            settings.resolved_database_url, bootstrap=settings.api_keys, pepper=settings.key_pepper
        )
        limiter = RateLimiter(
            settings.resolved_rate_limit_url,
            rate_per_s=settings.key_rate_per_s,
            burst=settings.key_burst,
        )
        app = http_app(server, keyring=keyring, limiter=limiter, host=host, path=path)
        uvicorn.run(app, host=host, port=port, log_level=settings.log_level.lower())
