// The client: openapi-fetch's typed `GET`/`POST`/… over the generated `paths`, with a
// fetch that sends the key, retries a 503 with exponential backoff (as the Python
// client: a 503 means the server did nothing, or stored a transcript whose jobs stay
// queued, which a re-sent transcript does not store twice) and turns every error answer
// into its typed error (./errors.ts).
import createClient, { type Client } from "openapi-fetch";

import { ConnectionFailed, errorFrom } from "./errors.js";
import type { paths } from "./schema.js";

export interface ClientOptions {
  /** The API's address; default http://127.0.0.1:8000. */
  baseUrl?: string;
  /** One of the server's MEMLANE_API_KEYS. */
  apiKey?: string;
  /** Extra attempts after a 503 (default 3). */
  retries?: number;
  /** Milliseconds before the first retry, doubled each time (default 250). */
  backoffMs?: number;
  /** Milliseconds before a request is abandoned (default 30 000). */
  timeoutMs?: number;
  /** The fetch to send with (default: the global one). */
  fetch?: typeof globalThis.fetch;
}

export type MemlaneClient = Client<paths>;

export function createMemlaneClient(options: ClientOptions = {}): MemlaneClient {
  const baseUrl = (options.baseUrl ?? "http://127.0.0.1:8000").replace(/\/+$/, "");
  const retries = Math.max(0, options.retries ?? 3);
  const backoffMs = Math.max(0, options.backoffMs ?? 250);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const send = options.fetch ?? globalThis.fetch;

  async function fetchTyped(request: Request): Promise<Response> {
    if (options.apiKey) request.headers.set("authorization", `Bearer ${options.apiKey}`);
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await send(request.clone(), { signal: AbortSignal.timeout(timeoutMs) });
      } catch (error) {
        throw new ConnectionFailed(
          `cannot reach the memlane API at ${baseUrl} (${String(error)}); check baseUrl`,
          { cause: error },
        );
      }
      if (response.status === 503 && attempt < retries) {
        await new Promise((resolve) => setTimeout(resolve, backoffMs * 2 ** attempt));
        continue;
      }
      if (response.status >= 400) throw errorFrom(response.status, await response.text());
      return response;
    }
  }

  return createClient<paths>({ baseUrl, fetch: fetchTyped });
}

/** The data of an answer: error answers are thrown as typed errors, so what is left is
 * the data (undefined only for a route answering 204). */
export async function ok<T>(answer: Promise<{ data?: T }>): Promise<T> {
  return (await answer).data as T;
}
