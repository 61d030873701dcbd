// The client against a live `memlane serve` (tests/integration/test_typescript_client.py
// starts one and runs `npm test` with MEMLANE_CLIENT_URL and MEMLANE_CLIENT_KEY set).
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  ApiError,
  BudgetExceeded,
  ConnectionFailed,
  createMemlaneClient,
  InvalidRequest,
  InvalidTranscript,
  NotFound,
  ok,
  Unauthorized,
  type Schemas,
} from "../src/index.js";

const baseUrl = process.env.MEMLANE_CLIENT_URL;
const apiKey = process.env.MEMLANE_CLIENT_KEY;
if (!baseUrl || !apiKey) throw new Error("set MEMLANE_CLIENT_URL and MEMLANE_CLIENT_KEY to a running `memlane serve`");

const memlane = createMemlaneClient({ baseUrl, apiKey });
const run = `ts-${process.pid}-${Date.now()}`;

function transcript(user: string, first: string): Schemas["TranscriptIn"] {
  const messages: Schemas["TranscriptIn"]["messages"] = [];
  for (let i = 0; i < 5; i++) {
    messages.push({ role: "user", content: i === 0 ? first : `Question ${i} about my project.` });
    messages.push({ role: "assistant", content: `Answer ${i}.` });
  }
  return { conversation_id: `${run}-c1`, user_id: user, messages };
}

async function waitForJobs(jobIds: string[]): Promise<string[]> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const jobs = await Promise.all(
      jobIds.map((job_id) => ok(memlane.GET("/v1/jobs/{job_id}", { params: { path: { job_id } } }))),
    );
    const statuses = jobs.map((job) => job.status);
    if (statuses.every((s) => s === "done" || s === "failed") || Date.now() > deadline) return statuses;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe("memlane's TypeScript client", () => {
  it("stores a transcript, runs its job and puts what was learned in a context", async () => {
    const user = `${run}-maya`;
    const queued = await ok(
      memlane.POST("/v1/transcripts", {
        body: transcript(user, "I prefer TypeScript over JavaScript for frontend work."),
      }),
    );
    assert.equal(queued.stored_messages, 10);
    assert.equal(queued.job_ids.length, 1);
    assert.deepEqual(await waitForJobs(queued.job_ids), ["done"]);
    const context = await ok(
      memlane.POST("/v1/context", { body: { user_id: user, query: "which language for the frontend?" } }),
    );
    assert.match(context.context, /TypeScript/);
    assert.ok((context.pack.items ?? []).some((item) => item.included));
  });

  it("adds, edits, lists, reads the history of and forgets a memory", async () => {
    const user_id = `${run}-sam`;
    const added = await ok(
      memlane.POST("/v1/users/{user_id}/memories", {
        params: { path: { user_id } },
        body: { content: "Lives in Lisbon by the river", category: "fact", importance: 0.7 },
      }),
    );
    const path = { user_id, memory_id: added.id };
    const edited = await ok(
      memlane.PATCH("/v1/users/{user_id}/memories/{memory_id}", {
        params: { path },
        body: { importance: 0.9 },
      }),
    );
    assert.equal(edited.importance, 0.9);
    const page = await ok(
      memlane.GET("/v1/users/{user_id}/memories", { params: { path: { user_id }, query: { limit: 10 } } }),
    );
    assert.deepEqual(
      page.memories.map((m) => m.content),
      ["Lives in Lisbon by the river"],
    );
    const history = await ok(
      memlane.GET("/v1/users/{user_id}/memories/{memory_id}/history", { params: { path } }),
    );
    assert.deepEqual(
      history.map((event) => event.kind),
      ["created", "edited"],
    );
    await ok(memlane.DELETE("/v1/users/{user_id}/memories/{memory_id}", { params: { path } }));
    const forgotten = await ok(memlane.GET("/v1/users/{user_id}/memories/{memory_id}", { params: { path } }));
    assert.equal(forgotten.status, "deleted"); // forgotten: out of every context, restorable
  });

  it("manages webhooks with an admin key", async () => {
    const hook = await ok(
      memlane.POST("/v1/webhooks", {
        body: { url: "https://example.com/hook", events: ["job.done", "memory.created"] },
      }),
    );
    assert.equal(hook.secret.length, 64);
    const listed = await ok(memlane.GET("/v1/webhooks"));
    assert.ok(listed.some((h) => h.id === hook.id));
    await ok(memlane.DELETE("/v1/webhooks/{webhook_id}", { params: { path: { webhook_id: hook.id } } }));
    const after = await ok(memlane.GET("/v1/webhooks"));
    assert.ok(!after.some((h) => h.id === hook.id));
  });

  it("throws the typed error of each error answer", async () => {
    const missing = memlane.GET("/v1/jobs/{job_id}", { params: { path: { job_id: "job_nope" } } });
    await assert.rejects(missing, (error: unknown) => {
      assert.ok(error instanceof NotFound && error instanceof ApiError);
      assert.equal(error.status, 404);
      assert.equal(error.code, "not_found");
      return true;
    });
    const negative = memlane.POST("/v1/context", { body: { user_id: `${run}-x`, budget_tokens: -5 } });
    await assert.rejects(negative, (error: unknown) => {
      assert.ok(error instanceof InvalidRequest);
      assert.equal(error.code, "validation_error");
      return true;
    });
    const empty = memlane.POST("/v1/transcripts", {
      body: { conversation_id: `${run}-c2`, user_id: `${run}-x`, messages: [] },
    });
    await assert.rejects(empty, InvalidTranscript);
    const user_id = `${run}-pinned`;
    await ok(
      memlane.POST("/v1/users/{user_id}/memories", {
        params: { path: { user_id } },
        body: { content: "Always answer in formal English, whatever the question ".repeat(8), tier: "pinned" },
      }),
    );
    const tight = memlane.POST("/v1/context", { body: { user_id, budget_tokens: 20 } });
    await assert.rejects(tight, (error: unknown) => {
      assert.ok(error instanceof BudgetExceeded);
      assert.ok(error.required > error.budget && error.budget > 0);
      return true;
    });
  });

  it("says Unauthorized for a wrong key and ConnectionFailed for no server", async () => {
    const stranger = createMemlaneClient({ baseUrl, apiKey: "not-a-key" });
    await assert.rejects(stranger.GET("/v1/webhooks"), Unauthorized);
    const nowhere = createMemlaneClient({ baseUrl: "http://127.0.0.1:9", retries: 0 });
    await assert.rejects(nowhere.GET("/healthz"), ConnectionFailed);
  });
});
