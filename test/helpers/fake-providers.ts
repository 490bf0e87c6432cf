// Real local HTTP servers that speak the model providers' protocols as their
// APIs do (paths, headers, SSE events, error bodies), so tests never reach
// the internet.
//
//   const openai = await startFakeOpenAI({ apiKey: 'sk-test' });  // also startFakeAnthropic
//   t.teardown(openai.close);
//   openai.enqueue({ reply: 'Hello there', chunks: 3 }, { status: 429, retryAfter: 2 });
//   adapter.complete(req, { apiKey: 'sk-test', baseUrl: openai.url });
//   openai.requests[0].model / .messages / .apiKey
//
// `url` is the baseUrl for the adapters: http://127.0.0.1:PORT/v1 for OpenAI
// (the adapter adds /chat/completions), http://127.0.0.1:PORT for Anthropic (the
// adapter adds /v1/messages). Endpoints: OpenAI POST /v1/chat/completions
// (streaming SSE or JSON), GET /v1/models, GET /v1/key (OpenRouter's key
// check); Anthropic POST /v1/messages (streaming or JSON), GET /v1/models.
//
// Each completion request takes the next queued behaviour, or the default one
// (settable with setDefault; initially `{}`). Behaviours:
//   { reply?, chunks?, delayMs?, usage?, finishReason? }  a normal answer.
//       reply: text or (request) => text; default "echo: <last user message>".
//       chunks: number of text deltas (default one a word); delayMs: pause
//       before each delta; pieces: the deltas exactly, instead of reply and
//       chunks (a surrogate pair may be cut between two); usage: {input,
//       output} or false to send none (default: words in the prompt, words
//       in the reply); finishReason: the
//       protocol's own word (default stop / end_turn); gate: a promise the
//       answer waits for before it starts (many requests held at once).
//   { status, retryAfter?, message? }  an error answer in the protocol's
//       shape (429 rate limit, 500, 529 overloaded, 401, 404 ...);
//       retryAfter sets the retry-after header in seconds.
//   { cutAfterChunks: n, endCleanly? }  n deltas, then the socket is destroyed
//       (endCleanly: the response just ends, with no finish event).
//   { hang: true, afterChunks? }  never answers (or stops after n deltas)
//       until the client gives up or close() runs.
// Requests to /models and /key take no behaviour. With `apiKey` set, a request
// with another key gets 401 before any behaviour is taken; with `models` set,
// an unknown model gets 404. Every request is recorded in `requests`.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';

export type FakeAnswer = {
  reply?: string | ((request: RecordedRequest) => string);
  chunks?: number;
  pieces?: string[];
  delayMs?: number;
  usage?: { input: number; output: number } | false;
  finishReason?: string;
  gate?: Promise<void>;
};
export type FakeBehaviour =
  | FakeAnswer
  | { status: number; retryAfter?: number; message?: string }
  | (FakeAnswer & { cutAfterChunks: number; endCleanly?: boolean })
  | (FakeAnswer & { hang: true; afterChunks?: number });

export type RecordedRequest = {
  method: string;
  path: string;
  /** The key the client sent (Bearer token, or Anthropic's x-api-key). */
  apiKey: string | undefined;
  headers: IncomingHttpHeaders;
  model?: string;
  /** Text of each message (content parts joined); Anthropic's system is in `system`. */
  messages?: { role: string; content: string }[];
  system?: string;
  stream?: boolean;
  body: unknown;
};

export type FakeProviderOptions = { apiKey?: string; models?: string[] };

export type FakeProvider = {
  url: string;
  requests: RecordedRequest[];
  enqueue: (...behaviours: FakeBehaviour[]) => void;
  setDefault: (behaviour: FakeBehaviour) => void;
  close: () => Promise<void>;
};

const content = z.union([
  z.string(),
  z.array(z.looseObject({ type: z.string(), text: z.string().optional() })),
  z.null(),
]);
const textOf = (c: z.infer<typeof content> | undefined) =>
  typeof c === 'string' ? c : (c ?? []).map((p) => p.text ?? '').join('');
const messages = z.array(z.looseObject({ role: z.string(), content: content.optional() })).min(1);
const openaiBody = z.looseObject({
  model: z.string().min(1),
  messages,
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullish(),
});
const anthropicBody = z.looseObject({
  model: z.string().min(1),
  max_tokens: z.number().int().positive(),
  messages,
  system: content.optional(),
  stream: z.boolean().optional(),
});

type Protocol = {
  basePath: string;
  keyOf(headers: IncomingHttpHeaders): string | undefined;
  errorBody(status: number, message: string): unknown;
  completionsPath: string;
  parse(body: unknown):
    | {
        ok: true;
        model: string;
        messages: { role: string; content: string }[];
        system?: string;
        stream: boolean;
        usage: boolean;
      }
    | { ok: false; message: string };
  listModels(models: string[]): unknown;
  /** Writes a whole answer; returns after the last byte (or after a cut/hang starts). */
  answer(res: ServerResponse, a: Answer): Promise<void>;
};

type Answer = {
  model: string;
  pieces: string[];
  input: number;
  output: number;
  usage: boolean;
  finishReason?: string;
  stream: boolean;
  stopAfter?: number;
  cut?: 'destroy' | 'end' | 'hang';
  delayMs: number;
};

const words = (s: string) => (s.match(/\S+/g) ?? []).length;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let nextId = 1;

/** `chunks` pieces at word boundaries (one a word by default, never an empty one). */
function splitReply(text: string, chunks: number | undefined): string[] {
  const parts = text.match(/\S+\s*/g) ?? [text];
  const n = Math.min(chunks ?? parts.length, parts.length);
  return Array.from({ length: n }, (_, i) =>
    parts.slice(Math.floor((i * parts.length) / n), Math.floor(((i + 1) * parts.length) / n)).join(''),
  );
}

/** Streams SSE events; stops at `stopAfter` deltas and cuts, ends or hangs as asked. */
async function streamEvents(
  res: ServerResponse,
  a: Answer,
  head: unknown[],
  delta: (piece: string) => unknown,
  tail: unknown[],
  asEvent: (e: unknown) => string,
) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const write = (e: unknown) =>
    new Promise<void>((resolve) => (res.destroyed ? resolve() : res.write(asEvent(e), () => resolve())));
  for (const e of head) await write(e);
  for (const [i, piece] of a.pieces.entries()) {
    if (a.stopAfter === i) return stop(res, a.cut);
    if (a.delayMs) await sleep(a.delayMs);
    await write(delta(piece));
  }
  if (a.stopAfter !== undefined) return stop(res, a.cut);
  for (const e of tail) await write(e);
  res.end();
}

function stop(res: ServerResponse, how: Answer['cut']) {
  if (how === 'destroy') res.socket?.destroy();
  else if (how === 'end') res.end();
  // 'hang': leave the response open
}

const openaiProtocol: Protocol = {
  basePath: '/v1',
  completionsPath: '/v1/chat/completions',
  keyOf: (h) => h.authorization?.replace(/^Bearer\s+/i, ''),
  errorBody(status, message) {
    const [type, code] =
      status === 401
        ? ['invalid_request_error', 'invalid_api_key']
        : status === 404
          ? ['invalid_request_error', 'model_not_found']
          : status === 429
            ? ['requests', 'rate_limit_exceeded']
            : status >= 500
              ? ['server_error', null]
              : ['invalid_request_error', null];
    return { error: { message, type, param: null, code } };
  },
  parse(body) {
    const r = openaiBody.safeParse(body);
    if (!r.success)
      return { ok: false, message: r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') };
    const msgs = r.data.messages.map((m) => ({ role: m.role, content: textOf(m.content) }));
    // A JSON answer always has usage; a stream only when stream_options asks.
    const stream = Boolean(r.data.stream);
    return {
      ok: true,
      model: r.data.model,
      messages: msgs,
      stream,
      usage: !stream || Boolean(r.data.stream_options?.include_usage),
    };
  },
  listModels: (models) => ({
    object: 'list',
    data: models.map((id) => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'fake' })),
  }),
  async answer(res, a) {
    const id = `chatcmpl-fake${nextId++}`;
    const created = Math.floor(Date.now() / 1000);
    const usage = { prompt_tokens: a.input, completion_tokens: a.output, total_tokens: a.input + a.output };
    const finish = a.finishReason ?? 'stop';
    if (!a.stream) {
      if (a.cut) return stop(res, a.cut === 'end' ? 'destroy' : a.cut);
      const message = { role: 'assistant', content: a.pieces.join(''), refusal: null };
      return void json(res, 200, {
        id,
        object: 'chat.completion',
        created,
        model: a.model,
        choices: [{ index: 0, message, finish_reason: finish, logprobs: null }],
        ...(a.usage ? { usage } : {}),
      });
    }
    const chunk = (choices: unknown[], extra: object = {}) => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model: a.model,
      choices,
      ...extra,
    });
    await streamEvents(
      res,
      a,
      [chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }])],
      (piece) => chunk([{ index: 0, delta: { content: piece }, finish_reason: null }]),
      [chunk([{ index: 0, delta: {}, finish_reason: finish }]), ...(a.usage ? [chunk([], { usage })] : []), '[DONE]'],
      (e) => `data: ${typeof e === 'string' ? e : JSON.stringify(e)}\n\n`,
    );
  },
};

const ANTHROPIC_ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};

const anthropicProtocol: Protocol = {
  basePath: '/v1',
  completionsPath: '/v1/messages',
  // Anthropic's API takes the key as x-api-key (what the adapter sends); a Bearer token is read too.
  keyOf: (h) => (typeof h['x-api-key'] === 'string' ? h['x-api-key'] : h.authorization?.replace(/^Bearer\s+/i, '')),
  errorBody: (status, message) => ({
    type: 'error',
    error: { type: ANTHROPIC_ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error'), message },
  }),
  parse(body) {
    const r = anthropicBody.safeParse(body);
    if (!r.success)
      return { ok: false, message: r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') };
    const msgs = r.data.messages.map((m) => ({ role: m.role, content: textOf(m.content) }));
    const system = r.data.system === undefined ? undefined : textOf(r.data.system);
    return {
      ok: true,
      model: r.data.model,
      messages: msgs,
      ...(system === undefined ? {} : { system }),
      stream: Boolean(r.data.stream),
      usage: true,
    };
  },
  listModels: (models) => ({
    data: models.map((id) => ({ type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' })),
    has_more: false,
    first_id: models[0] ?? null,
    last_id: models.at(-1) ?? null,
  }),
  async answer(res, a) {
    const id = `msg_fake${nextId++}`;
    const stop_reason = a.finishReason ?? 'end_turn';
    const message = { id, type: 'message', role: 'assistant', model: a.model, stop_sequence: null };
    if (!a.stream) {
      if (a.cut) return stop(res, a.cut === 'end' ? 'destroy' : a.cut);
      return void json(res, 200, {
        ...message,
        content: [{ type: 'text', text: a.pieces.join('') }],
        stop_reason,
        ...(a.usage ? { usage: { input_tokens: a.input, output_tokens: a.output } } : {}),
      });
    }
    await streamEvents(
      res,
      a,
      [
        {
          type: 'message_start',
          message: {
            ...message,
            content: [],
            stop_reason: null,
            ...(a.usage ? { usage: { input_tokens: a.input, output_tokens: 1 } } : {}),
          },
        },
        { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
        { type: 'ping' },
      ],
      (text) => ({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } }),
      [
        { type: 'content_block_stop', index: 0 },
        {
          type: 'message_delta',
          delta: { stop_reason, stop_sequence: null },
          ...(a.usage ? { usage: { output_tokens: a.output } } : {}),
        },
        { type: 'message_stop' },
      ],
      (e) => `event: ${(e as { type: string }).type}\ndata: ${JSON.stringify(e)}\n\n`,
    );
  },
};

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  let raw = '';
  for await (const chunk of req) raw += chunk;
  if (!raw) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

async function startFake(
  protocol: Protocol,
  options: FakeProviderOptions,
  defaultModels: string[],
  urlSuffix: string,
): Promise<FakeProvider> {
  const requests: RecordedRequest[] = [];
  const queue: FakeBehaviour[] = [];
  let fallback: FakeBehaviour = {};
  const models = options.models ?? defaultModels;

  async function handle(req: IncomingMessage, res: ServerResponse) {
    res.on('error', () => undefined); // a client that went away is not a test failure
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    const body = await readBody(req);
    const recorded: RecordedRequest = {
      method: req.method ?? 'GET',
      path,
      apiKey: protocol.keyOf(req.headers),
      headers: req.headers,
      body,
    };
    requests.push(recorded);
    const fail = (status: number, message: string, headers: Record<string, string> = {}) =>
      json(res, status, protocol.errorBody(status, message), headers);

    if (options.apiKey !== undefined && recorded.apiKey !== options.apiKey) return fail(401, 'invalid API key');
    if (req.method === 'GET' && path === `${protocol.basePath}/models`)
      return json(res, 200, protocol.listModels(models));
    if (req.method === 'GET' && path === `${protocol.basePath}/key` && protocol === openaiProtocol) {
      return json(res, 200, { data: { label: 'fake key', usage: 0, limit: null, is_free_tier: false } });
    }
    if (req.method !== 'POST' || path !== protocol.completionsPath) return fail(404, `no route ${req.method} ${path}`);

    const parsed = protocol.parse(body);
    if (!parsed.ok) return fail(400, parsed.message);
    Object.assign(
      recorded,
      { model: parsed.model, messages: parsed.messages, stream: parsed.stream },
      parsed.system === undefined ? {} : { system: parsed.system },
    );
    if (options.models && !options.models.includes(parsed.model))
      return fail(404, `model ${parsed.model} does not exist`);

    const b = queue.shift() ?? fallback;
    if ('status' in b)
      return fail(
        b.status,
        b.message ?? `fake error ${b.status}`,
        b.retryAfter === undefined ? {} : { 'retry-after': String(b.retryAfter) },
      );
    if ('hang' in b && b.afterChunks === undefined) return; // never answer

    if ('gate' in b && b.gate) await b.gate;
    const lastUser = [...parsed.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
    const text =
      b.pieces?.join('') ?? (typeof b.reply === 'function' ? b.reply(recorded) : (b.reply ?? `echo: ${lastUser}`));
    const pieces = b.pieces ?? splitReply(text, b.chunks);
    const prompt = `${parsed.messages.map((m) => m.content).join(' ')} ${parsed.system ?? ''}`;
    const answer: Answer = {
      model: parsed.model,
      pieces,
      input: b.usage ? b.usage.input : words(prompt),
      output: b.usage ? b.usage.output : words(text),
      usage: b.usage !== false && parsed.usage,
      ...(b.finishReason === undefined ? {} : { finishReason: b.finishReason }),
      stream: parsed.stream,
      delayMs: b.delayMs ?? 0,
    };
    if ('cutAfterChunks' in b)
      Object.assign(answer, { stopAfter: b.cutAfterChunks, cut: b.endCleanly ? 'end' : 'destroy' });
    if ('hang' in b) Object.assign(answer, { stopAfter: b.afterChunks, cut: 'hang' });
    await protocol.answer(res, answer);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: Error) => {
      if (!res.headersSent) json(res, 500, protocol.errorBody(500, `fake server failed: ${error.message}`));
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  let closed: Promise<void> | null = null;
  return {
    url: `http://127.0.0.1:${port}${urlSuffix}`,
    requests,
    enqueue: (...behaviours) => void queue.push(...behaviours),
    setDefault: (behaviour) => {
      fallback = behaviour;
    },
    close: () =>
      (closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections(); // hanging and keep-alive connections too
      })),
  };
}

export const startFakeOpenAI = (options: FakeProviderOptions = {}) =>
  startFake(openaiProtocol, options, ['gpt-4o-mini', 'gpt-4o'], '/v1');

export const startFakeAnthropic = (options: FakeProviderOptions = {}) =>
  startFake(anthropicProtocol, options, ['claude-3-5-haiku-latest', 'claude-sonnet-4-0'], '');
