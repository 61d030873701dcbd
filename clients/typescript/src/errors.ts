// The typed errors of the client, read from the API's error shape
// {"error": {"code", "message", …}}. They mirror the Python client's
// (memlane/client/errors.py): one class per meaning, the same names, and the one table
// ERRORS from each code the API answers (memlane/pipeline/error_codes.py) to its class;
// tests/unit/test_typescript_client.py fails when a code is missing here.

/** Any error of this client. */
export class MemlaneError extends Error {
  override name = "MemlaneError";
}

/** The API answered with an error: `status`, `code` (stable) and `message` say which;
 * `details` holds the body's other fields. */
export class ApiError extends MemlaneError {
  override name = "ApiError";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown>,
  ) {
    super(`${code} (${status}): ${message}`);
  }
}

/** 422 invalid_transcript: the transcript was rejected whole; nothing was written. */
export class InvalidTranscript extends ApiError {
  override name = "InvalidTranscript";
}

/** 422 validation_error: a parameter is out of range or malformed (`details.details`
 * names each field at fault). */
export class InvalidRequest extends ApiError {
  override name = "InvalidRequest";
}

/** 413 message_too_large / body_too_large: send shorter messages or fewer per request. */
export class PayloadTooLarge extends ApiError {
  override name = "PayloadTooLarge";
}

/** 422 budget_exceeded: the must-have items do not fit; `budget` and `required` say by
 * how much (raise budget_tokens, or unpin). */
export class BudgetExceeded extends ApiError {
  override name = "BudgetExceeded";
  readonly budget: number;
  readonly required: number;
  constructor(status: number, code: string, message: string, details: Record<string, unknown>) {
    super(status, code, message, details);
    this.budget = Number(details.budget ?? 0);
    this.required = Number(details.required ?? 0);
  }
}

/** 401: no key or a wrong one (pass `apiKey`). */
export class Unauthorized extends ApiError {
  override name = "Unauthorized";
}

/** 403 forbidden: the key lacks the scope the call needs (read, write or admin); use a
 * key made with it (`memlane keys create --scopes`). */
export class Forbidden extends ApiError {
  override name = "Forbidden";
}

/** 429 rate_limited: the key is over its rate; `retryAfter` says how many seconds until
 * a call would pass (also the Retry-After header). */
export class RateLimited extends ApiError {
  override name = "RateLimited";
  readonly retryAfter: number;
  constructor(status: number, code: string, message: string, details: Record<string, unknown>) {
    super(status, code, message, details);
    const found = details.retry_after;
    this.retryAfter = typeof found === "number" ? found : 1;
  }
}

/** 404: no such memory, job, pack or webhook (for this user). */
export class NotFound extends ApiError {
  override name = "NotFound";
}

/** 405: the server has the path but not this method: likely an older memlane. */
export class MethodNotAllowed extends ApiError {
  override name = "MethodNotAllowed";
}

/** 409: the request contradicts the stored state (a job not failed, …). */
export class Conflict extends ApiError {
  override name = "Conflict";
}

/** Any other HTTP error the server's framework answered; `status` says which. */
export class HttpError extends ApiError {
  override name = "HttpError";
}

/** 500: configuration_error or internal_error on the server; see its logs. */
export class ServerError extends ApiError {
  override name = "ServerError";
}

/** 503 (not_ready, database_unavailable, broker_unavailable), still after the retries. */
export class Unavailable extends ApiError {
  override name = "Unavailable";
}

/** 503 broker_unavailable: the transcript and its jobs are stored and stay queued
 * (`jobIds`); re-sending stores nothing twice. */
export class BrokerUnavailable extends Unavailable {
  override name = "BrokerUnavailable";
  readonly jobIds: string[];
  constructor(status: number, code: string, message: string, details: Record<string, unknown>) {
    super(status, code, message, details);
    const found = details.job_ids;
    this.jobIds = Array.isArray(found) ? found.map(String) : [];
  }
}

/** The API could not be reached at all (refused, timed out, DNS). */
export class ConnectionFailed extends MemlaneError {
  override name = "ConnectionFailed";
  readonly code = "connection_failed";
}

type ApiErrorClass = new (
  status: number,
  code: string,
  message: string,
  details: Record<string, unknown>,
) => ApiError;

/** Each code the API answers and its class. */
export const ERRORS: Readonly<Record<string, ApiErrorClass>> = {
  invalid_transcript: InvalidTranscript,
  validation_error: InvalidRequest,
  budget_exceeded: BudgetExceeded,
  message_too_large: PayloadTooLarge,
  body_too_large: PayloadTooLarge,
  unauthorized: Unauthorized,
  forbidden: Forbidden,
  rate_limited: RateLimited,
  not_found: NotFound,
  method_not_allowed: MethodNotAllowed,
  conflict: Conflict,
  http_error: HttpError,
  configuration_error: ServerError,
  internal_error: ServerError,
  not_ready: Unavailable,
  database_unavailable: Unavailable,
  broker_unavailable: BrokerUnavailable,
};

// A code this client does not know (a newer server): read by its status.
const BY_STATUS: Readonly<Record<number, ApiErrorClass>> = {
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  405: MethodNotAllowed,
  409: Conflict,
  413: PayloadTooLarge,
  422: InvalidRequest,
  429: RateLimited,
  503: Unavailable,
};

/** The typed error of an error answer (any status >= 400); a body not of the API's
 * shape (a proxy's page) is `http_<status>` with its text. */
export function errorFrom(status: number, text: string): ApiError {
  let code = `http_${status}`;
  let message = text.slice(0, 500);
  const details: Record<string, unknown> = {};
  try {
    const error: unknown = (JSON.parse(text) as { error?: unknown }).error;
    if (error !== null && typeof error === "object" && typeof (error as { code?: unknown }).code === "string") {
      const fields = error as Record<string, unknown>;
      code = fields.code as string;
      message = String(fields.message ?? "");
      for (const [key, value] of Object.entries(fields)) {
        if (key !== "code" && key !== "message") details[key] = value;
      }
    }
  } catch {
    // not JSON: the text as it is
  }
  const kind = ERRORS[code] ?? BY_STATUS[status] ?? (status >= 500 ? ServerError : ApiError);
  return new kind(status, code, message, details);
}
