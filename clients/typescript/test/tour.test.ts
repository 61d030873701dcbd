// The tour the docs page shows (docs/typescript.md includes the part between the
// markers), run against the live server as every other test.
import assert from "node:assert/strict";
import { it } from "node:test";

import { createMemlaneClient, NotFound, ok } from "../src/index.js";

it("runs the docs' tour", async () => {
  const baseUrl = process.env.MEMLANE_CLIENT_URL;
  const apiKey = process.env.MEMLANE_CLIENT_KEY;
  const userId = `tour-${process.pid}-${Date.now()}`;
  const messages = [
    { role: "user" as const, content: "I prefer TypeScript over JavaScript for frontend work." },
    ...Array.from({ length: 9 }, (_, i) => ({
      role: i % 2 === 0 ? ("assistant" as const) : ("user" as const),
      content: `Message ${i + 1}.`,
    })),
  ];
  // --8<-- [start:tour]
  const memlane = createMemlaneClient({ baseUrl, apiKey }); // e.g. http://127.0.0.1:8000

  // hand over a conversation: stored at once, learned from in the background
  const { job_ids } = await ok(
    memlane.POST("/v1/transcripts", { body: { conversation_id: "c1", user_id: userId, messages } }),
  );

  // … later, before the next model call: the context for the system prompt
  const { context, pack } = await ok(
    memlane.POST("/v1/context", {
      body: { user_id: userId, query: "which language for the frontend?", budget_tokens: 2000 },
    }),
  );

  // errors are typed, as in the Python client
  try {
    await memlane.GET("/v1/jobs/{job_id}", { params: { path: { job_id: "job_unknown" } } });
  } catch (error) {
    if (!(error instanceof NotFound)) throw error;
  }
  // --8<-- [end:tour]
  assert.equal(job_ids.length, 1);
  assert.equal(typeof context, "string");
  assert.equal(pack.user_id, userId);
});
