/**
 * A fetch-based client for memweb's JSON API. Every type comes from `schema.ts`, which
 * openapi-typescript generates from memweb's OpenAPI document (`npm run generate`), and every path
 * is checked against it at compile time: a route the server drops or renames fails `tsc`.
 *
 * Retries follow the Python client: 429 and 503 (the server asking for a later try), 502/504 and
 * network failures, and the 409 of an Idempotency-Key still in progress, each after its
 * Retry-After when given, a bounded number of times; every write sends one Idempotency-Key,
 * kept across its retries.
 */
import type { components, paths } from "./schema.js";

export type { components, paths };
type Schemas = components["schemas"];
export type Me = Schemas["MeOut"];
export type Bank = Schemas["BankOut"];
export type BankIn = Schemas["BankIn"];
export type Orb = Schemas["OrbOut"];
export type OrbDetail = Schemas["OrbDetailOut"];
export type OrbRevisions = Schemas["OrbRevisionsOut"];
export type OrbPage = Schemas["PagedOrbOut"];
export type EpisodeIn = Schemas["EpisodeIn"];
export type EpisodeQueued = Schemas["EpisodeQueuedOut"];
export type Ingest = Schemas["IngestOut"];
export type RememberIn = Schemas["RememberIn"];
export type RetrieveIn = Schemas["RetrieveIn"];
export type Retrieval = Schemas["RetrieveOut"];
export type RetrievalOutcomeIn = Schemas["RetrievalOutcomeIn"];
export type Transition = Schemas["TransitionIn"];
export type TransitionsWritten = Schemas["TransitionsOut"];
export type ExperienceRetrieveIn = Schemas["ExperienceRetrieveIn"];
export type ExperienceRetrieval = Schemas["ExperienceRetrieveOut"];
export type Job = Schemas["JobOut"];
export type Run = Schemas["RunOut"];
export type RunSpec = Schemas["RunSpec"];
export type Webhook = Schemas["WebhookOut"];
export type WebhookCreated = Schemas["WebhookCreatedOut"];
export type Delivery = Schemas["WebhookDeliveryOut"];
export type DeliveryPage = Schemas["PagedWebhookDeliveryOut"];

/** Which refusal a 409 is: reload for a stale version; an in-progress one was retried already. */
export type ErrorKind =
  | "bad_request" | "unauthorized" | "forbidden" | "not_found" | "stale_version" | "in_progress"
  | "conflict" | "too_large" | "invalid" | "rate_limited" | "server" | "connection" | "timed_out" | "other";

export class MemwebError extends Error {
  constructor(
    message: string,
    readonly kind: ErrorKind,
    readonly status: number | null,
    readonly detail: unknown,
    readonly body: unknown,
  ) {
    super(message);
    this.name = "MemwebError";
  }
}

export interface RetryPolicy {
  maxRetries: number;
  /** The first retry's wait; doubled each retry, with jitter. */
  backoffMs: number;
  /** The longest wait; a longer Retry-After is thrown at once. */
  maxWaitMs: number;
}

export interface ClientOptions {
  retry?: Partial<RetryPolicy>;
  pollIntervalMs?: number;
  fetch?: typeof fetch;
}

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
type Query = Record<string, string | number | boolean | undefined | null>;
/** The schema's paths that answer `method`: a route the server drops fails to compile. */
export type PathWith<M extends Method> = {
  [P in keyof paths]: [NonNullable<paths[P][Lowercase<M>]>] extends [never] ? never : P;
}[keyof paths];
interface Request {
  body?: unknown;
  query?: Query;
  params?: Record<string, string | number>;
}

const RETRYABLE = new Set([429, 502, 503, 504]);
const STATUS_KINDS: Record<number, ErrorKind> = {
  400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 413: "too_large",
  422: "invalid", 429: "rate_limited",
};
// The DMRM routes say a version is stale in words only (no `current_version` in the body).
const STALE_WORDS = "changed after you loaded it";

function retryAfterMs(response: Response): number | null {
  const header = response.headers.get("Retry-After");
  const seconds = header === null ? NaN : Number(header);
  return Number.isFinite(seconds) ? Math.max(0, seconds) * 1000 : null;
}

function isInProgress(response: Response): boolean {
  return response.status === 409 && response.headers.has("Retry-After");
}

function errorKind(response: Response, body: unknown, detail: unknown): ErrorKind {
  if (response.status === 409) {
    if (isInProgress(response)) return "in_progress";
    const current = (body as { current_version?: number | null } | null)?.current_version;
    return current != null || String(detail).includes(STALE_WORDS) ? "stale_version" : "conflict";
  }
  return STATUS_KINDS[response.status] ?? (response.status >= 500 ? "server" : "other");
}

async function errorFrom(method: string, path: string, response: Response): Promise<MemwebError> {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  const detail = body !== null && typeof body === "object" && "detail" in body ? (body as { detail: unknown }).detail : body;
  const shown = typeof detail === "string" ? detail : JSON.stringify(detail);
  return new MemwebError(`${method} ${path}: HTTP ${response.status}: ${shown}`, errorKind(response, body, detail),
    response.status, detail, body);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class MemwebClient {
  private readonly baseUrl: string;
  private readonly retry: RetryPolicy;
  private readonly pollIntervalMs: number;
  private readonly fetch: typeof fetch;

  constructor(baseUrl: string, private readonly apiKey: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.retry = { maxRetries: 3, backoffMs: 500, maxWaitMs: 60_000, ...options.retry };
    this.pollIntervalMs = options.pollIntervalMs ?? 500;
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  // --- who is asking, banks ---
  me(): Promise<Me> {
    return this.send("GET", "/api/me");
  }
  banks(archived = false): Promise<Bank[]> {
    return this.send("GET", "/api/orbs/banks", { query: { archived: archived || undefined } });
  }
  bank(slug: string): Promise<Bank> {
    return this.send("GET", "/api/orbs/banks/{slug}", { params: { slug } });
  }
  bankCreate(body: BankIn): Promise<Bank> {
    return this.send("POST", "/api/orbs/banks", { body });
  }

  // --- episodes, lessons, retrieval ---
  /** Reflected into an Orb in the background (EpisodeQueued), or at once with `sync` (Ingest). */
  episodeWrite(slug: string, body: EpisodeIn, options: { sync?: boolean } = {}): Promise<EpisodeQueued | Ingest> {
    return this.send("POST", "/api/orbs/banks/{slug}/episodes", { params: { slug }, body, query: { sync: options.sync || undefined } });
  }
  episodeStatus(ingestId: number): Promise<Ingest> {
    return this.send("GET", "/api/orbs/episodes/{ingest_id}", { params: { ingest_id: ingestId } });
  }
  waitForEpisode(ingestId: number, timeoutMs = 120_000): Promise<Ingest> {
    return this.waitFor(() => this.episodeStatus(ingestId), (s) => s.status === "done" || s.status === "failed",
      `episode #${ingestId}`, timeoutMs);
  }
  remember(slug: string, body: RememberIn): Promise<Orb> {
    return this.send("POST", "/api/orbs/banks/{slug}/remember", { params: { slug }, body });
  }
  retrieve(slug: string, body: RetrieveIn): Promise<Retrieval> {
    return this.send("POST", "/api/orbs/banks/{slug}/retrieve", { params: { slug }, body });
  }
  async retrievalOutcome(retrievalId: number, body: RetrievalOutcomeIn): Promise<void> {
    await this.send("POST", "/api/orbs/retrievals/{retrieval_id}/outcome", { params: { retrieval_id: retrievalId }, body });
  }

  // --- Orbs ---
  orbs(query: { bank?: string; status?: string; domain?: string; customer_key?: string; q?: string; page?: number } = {}): Promise<OrbPage> {
    return this.send("GET", "/api/orbs/orbs", { query });
  }
  orb(orbId: number): Promise<OrbDetail> {
    return this.send("GET", "/api/orbs/orbs/{orb_id}", { params: { orb_id: orbId } });
  }
  orbRevisions(orbId: number): Promise<OrbRevisions> {
    return this.send("GET", "/api/orbs/orbs/{orb_id}/revisions", { params: { orb_id: orbId } });
  }
  eraseCustomer(slug: string, body: Schemas["ErasureIn"]): Promise<Job> {
    return this.send("POST", "/api/orbs/banks/{slug}/erasures", { params: { slug }, body });
  }
  job(jobId: number): Promise<Job> {
    return this.send("GET", "/api/jobs/{job_id}", { params: { job_id: jobId } });
  }
  waitForJob(jobId: number, timeoutMs = 300_000): Promise<Job> {
    return this.waitFor(() => this.job(jobId), (j) => j.status === "succeeded" || j.status === "failed", `job #${jobId}`,
      timeoutMs);
  }

  // --- DMRM experience memory ---
  transitions(slug: string, transitions: Transition[]): Promise<TransitionsWritten> {
    return this.send("POST", "/api/orbs/experiences/banks/{slug}/transitions", { params: { slug }, body: { transitions } });
  }
  experiencesRetrieve(slug: string, body: ExperienceRetrieveIn): Promise<ExperienceRetrieval> {
    return this.send("POST", "/api/orbs/experiences/banks/{slug}/retrieve", { params: { slug }, body });
  }

  // --- runs, webhooks ---
  runCreate(spec: RunSpec): Promise<Run> {
    return this.send("POST", "/api/evaluation/runs/", { body: spec });
  }
  run(runId: number): Promise<Run> {
    return this.send("GET", "/api/evaluation/runs/{run_id}", { params: { run_id: runId } });
  }
  webhooks(): Promise<Webhook[]> {
    return this.send("GET", "/api/webhooks/");
  }
  webhookCreate(body: Schemas["WebhookIn"]): Promise<WebhookCreated> {
    return this.send("POST", "/api/webhooks/", { body });
  }
  /** One page of deliveries, newest first. */
  deliveries(query: { webhook?: number; page?: number; page_size?: number } = {}): Promise<DeliveryPage> {
    return this.send("GET", "/api/webhooks/deliveries", { query });
  }

  // --- sending ---
  /** One call, retried as the server asks. `path` must be a path of the generated schema. */
  async send<T, M extends Method = Method>(method: M, path: PathWith<M>, request: Request = {}): Promise<T> {
    const url = this.url(path, request);
    const headers: Record<string, string> = { Authorization: `Bearer ${this.apiKey}`, Accept: "application/json" };
    if (request.body !== undefined) headers["Content-Type"] = "application/json";
    if (method !== "GET") headers["Idempotency-Key"] = crypto.randomUUID();
    const init: RequestInit = { method, headers, body: request.body === undefined ? undefined : JSON.stringify(request.body) };
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await this.fetch(url, init);
      } catch (failure) {
        const wait = this.waitBeforeRetry(attempt, null);
        if (wait === null) throw new MemwebError(`${method} ${path}: ${String(failure)}`, "connection", null, null, null);
        await sleep(wait);
        continue;
      }
      const wait = response.ok ? null : this.waitBeforeRetry(attempt, response);
      if (wait === null) {
        if (!response.ok) throw await errorFrom(method, path, response);
        return (response.status === 204 ? undefined : await response.json()) as T;
      }
      await response.body?.cancel();
      await sleep(wait);
    }
  }

  private url(path: string, request: Request): string {
    const filled = path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(String(request.params?.[name])));
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(request.query ?? {})) {
      if (value !== undefined && value !== null) query.set(name, String(value));
    }
    const search = query.toString();
    return `${this.baseUrl}${filled}${search ? `?${search}` : ""}`;
  }

  private waitBeforeRetry(attempt: number, response: Response | null): number | null {
    if (attempt >= this.retry.maxRetries) return null;
    if (response !== null) {
      if (!RETRYABLE.has(response.status) && !isInProgress(response)) return null;
      const asked = retryAfterMs(response);
      if (asked !== null) return asked <= this.retry.maxWaitMs ? asked : null;
    }
    return Math.min(this.retry.maxWaitMs, this.retry.backoffMs * 2 ** attempt * (0.5 + Math.random() / 2));
  }

  private async waitFor<T>(look: () => Promise<T>, done: (state: T) => boolean, what: string, timeoutMs: number): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const state = await look();
      if (done(state)) return state;
      if (Date.now() > deadline) throw new MemwebError(`${what} not finished after ${timeoutMs} ms`, "timed_out", null, state, state);
      await sleep(this.pollIntervalMs);
    }
  }
}
