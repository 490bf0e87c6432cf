// The model provider adapters against real local servers that speak the
// OpenAI and Anthropic protocols (test/helpers/fake-providers.ts). Nothing
// here reaches the internet: every call names the fake server's baseUrl.
import t from 'tap';
import { createAnthropicAdapter } from '../../../core/providers/anthropic.ts';
import { builtinAdapter } from '../../../core/providers/builtin.ts';
import { createOpenAICompatibleAdapter } from '../../../core/providers/openai.ts';
import {
  costMicros,
  defaultBaseUrl,
  modelInfo,
  parseModel,
  providerFor,
  PROVIDERS,
} from '../../../core/providers/registry.ts';
import { ProviderError, type CompletionRequest, type ProviderAdapter } from '../../../core/providers/types.ts';
import { startFakeAnthropic, startFakeOpenAI, type FakeProvider } from '../../helpers/fake-providers.ts';
import { testConfig } from '../../helpers/config.ts';

const KEY = 'sk-test-key';
// Generous for ordinary calls so a loaded machine never trips it; short where
// a test waits for the timeout on purpose.
const TIMEOUT_MS = 10_000;
const SHORT_TIMEOUT_MS = 500;

const openaiServer = await startFakeOpenAI({ apiKey: KEY, models: ['gpt-4o-mini'] });
const anthropicServer = await startFakeAnthropic({ apiKey: KEY, models: ['claude-3-5-haiku-latest'] });
t.teardown(() => Promise.all([openaiServer.close(), anthropicServer.close()]));

// defaultBaseUrl is never used: every call passes the fake's url, a private
// address, which the outbound policy allows only when told to (outbound.test.ts).
const allowPrivateUrls = true;
const openaiWith = (timeoutMs: number) =>
  createOpenAICompatibleAdapter({
    id: 'openai',
    displayName: 'OpenAI',
    defaultBaseUrl: 'http://127.0.0.1:9/v1',
    needsKey: true,
    models: [],
    timeoutMs,
    allowPrivateUrls,
  });
const anthropicWith = (timeoutMs: number) =>
  createAnthropicAdapter({ defaultBaseUrl: 'http://127.0.0.1:9', models: [], timeoutMs, allowPrivateUrls });
const openai = openaiWith(TIMEOUT_MS);

const protocols: Array<{
  name: string;
  adapter: ProviderAdapter;
  impatient: ProviderAdapter;
  server: FakeProvider;
  model: string;
  overloaded: number;
}> = [
  {
    name: 'openai',
    adapter: openai,
    impatient: openaiWith(SHORT_TIMEOUT_MS),
    server: openaiServer,
    model: 'gpt-4o-mini',
    overloaded: 503,
  },
  {
    name: 'anthropic',
    adapter: anthropicWith(TIMEOUT_MS),
    impatient: anthropicWith(SHORT_TIMEOUT_MS),
    server: anthropicServer,
    model: 'claude-3-5-haiku-latest',
    overloaded: 529,
  },
];

const ask = (model: string, extra: Partial<CompletionRequest> = {}): CompletionRequest => ({
  model,
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Say hello' },
  ],
  ...extra,
});

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to fail');
}

async function providerFailure(promise: Promise<unknown>): Promise<ProviderError> {
  const error = await failure(promise);
  if (!(error instanceof ProviderError)) throw new Error(`expected a ProviderError, got ${String(error)}`);
  return error;
}

for (const { name, adapter, impatient, server, model, overloaded } of protocols) {
  const creds = { apiKey: KEY, baseUrl: server.url };

  t.test(`${name}: streams deltas in order and returns the usage the server reports`, async (t) => {
    server.enqueue({ reply: 'Hello brave new world', chunks: 3, delayMs: 5, usage: { input: 12, output: 5 } });
    const before = server.requests.length;
    const deltas: string[] = [];
    const result = await adapter.complete(
      ask(model, { maxOutputTokens: 50, onDelta: (d) => void deltas.push(d) }),
      creds,
    );
    t.same(deltas, ['Hello ', 'brave ', 'new world']);
    t.same(result, { text: 'Hello brave new world', inputTokens: 12, outputTokens: 5, finishReason: 'stop' });
    const sent = server.requests[before]!;
    t.equal(sent.model, model);
    t.equal(sent.apiKey, KEY);
    t.equal(sent.stream, true);
    if (name === 'anthropic') {
      t.equal(sent.system, 'Be brief.', 'system messages travel in `system`');
      t.same(sent.messages, [{ role: 'user', content: 'Say hello' }]);
      t.match(sent.body, { max_tokens: 50 });
      t.equal(sent.headers['anthropic-version'], '2023-06-01');
    } else {
      t.same(sent.messages, [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Say hello' },
      ]);
      t.match(sent.body, { stream_options: { include_usage: true }, max_completion_tokens: 50 });
    }
  });

  t.test(`${name}: estimates tokens when the server sends no usage`, async (t) => {
    server.enqueue({ reply: 'x'.repeat(40), usage: false });
    const result = await adapter.complete(ask(model), creds);
    t.equal(result.outputTokens, 10, '~4 characters a token');
    t.ok(result.inputTokens > 0);
  });

  t.test(`${name}: async onDelta is awaited in order; its failure passes through unmapped`, async (t) => {
    server.enqueue({ reply: 'one two three', chunks: 3 });
    const seen: string[] = [];
    await adapter.complete(
      ask(model, {
        onDelta: async (d) => {
          await new Promise((r) => setTimeout(r, 5));
          seen.push(d);
        },
      }),
      creds,
    );
    t.same(seen, ['one ', 'two ', 'three']);
    server.enqueue({ reply: 'one two three', chunks: 3 });
    const error = await failure(
      adapter.complete(
        ask(model, {
          onDelta: () => {
            throw new Error('socket gone');
          },
        }),
        creds,
      ),
    );
    t.notOk(error instanceof ProviderError);
    t.match(error, { message: 'socket gone' });
  });

  t.test(`${name}: HTTP failures map to ProviderError kinds, without retries`, async (t) => {
    const before = server.requests.length;
    server.enqueue({ status: 429, retryAfter: 2 });
    const limited = await providerFailure(adapter.complete(ask(model), creds));
    t.match(limited, { kind: 'rate_limited', status: 429, retryAfterMs: 2000, retryable: true });
    t.equal(server.requests.length, before + 1, 'no retry');

    for (const [status, kind, retryable] of [
      [500, 'unavailable', true],
      [overloaded, 'unavailable', true],
      [400, 'bad_request', false],
      [403, 'invalid_key', false],
    ] as const) {
      server.enqueue({ status });
      t.match(
        await providerFailure(adapter.complete(ask(model), creds)),
        { kind, status, retryable },
        `${status} -> ${kind}`,
      );
    }

    const wrongKey = await providerFailure(adapter.complete(ask(model), { ...creds, apiKey: 'sk-wrong' }));
    t.match(wrongKey, { kind: 'invalid_key', status: 401, retryable: false });
    const unknownModel = await providerFailure(adapter.complete(ask('no-such-model'), creds));
    t.match(unknownModel, { kind: 'model_not_found', status: 404 });
    const noKey = await providerFailure(adapter.complete(ask(model), { baseUrl: server.url }));
    t.match(noKey, { kind: 'invalid_key' });
  });

  t.test(`${name}: a stream cut mid-way is interrupted, after the deltas that arrived`, async (t) => {
    server.enqueue({ reply: 'a b c d e', cutAfterChunks: 2 });
    const deltas: string[] = [];
    const cut = await providerFailure(adapter.complete(ask(model, { onDelta: (d) => void deltas.push(d) }), creds));
    t.match(cut, { kind: 'interrupted', retryable: true });
    t.same(deltas, ['a ', 'b ']);

    server.enqueue({ reply: 'a b c', cutAfterChunks: 1, endCleanly: true });
    t.match(
      await providerFailure(adapter.complete(ask(model), creds)),
      { kind: 'interrupted' },
      'a stream that ends without finishing',
    );
  });

  t.test(`${name}: a server that hangs is a timeout, before the headers and mid-stream`, async (t) => {
    server.enqueue({ hang: true });
    // The adapter's own timeout fired (it names it), not a transport default.
    t.match(await providerFailure(impatient.complete(ask(model), creds)), {
      kind: 'timeout',
      retryable: true,
      message: new RegExp(`within ${SHORT_TIMEOUT_MS} ms`),
    });

    server.enqueue({ reply: 'a b c', hang: true, afterChunks: 1 });
    const deltas: string[] = [];
    t.match(await providerFailure(impatient.complete(ask(model, { onDelta: (d) => void deltas.push(d) }), creds)), {
      kind: 'timeout',
    });
    t.same(deltas, ['a ']);

    // A slow stream that keeps sending is not a timeout: the deadline is per piece.
    server.enqueue({ reply: 'a b c d', delayMs: 200 });
    t.equal((await impatient.complete(ask(model), creds)).text, 'a b c d');
  });

  t.test(`${name}: the caller's abort is rethrown as it came, not as a provider failure`, async (t) => {
    server.enqueue({ reply: 'a b c d', delayMs: 100 });
    const controller = new AbortController();
    const reason = new Error('job cancelled');
    const error = await failure(
      adapter.complete(ask(model, { signal: controller.signal, onDelta: () => controller.abort(reason) }), creds),
    );
    t.equal(error, reason);
  });

  t.test(`${name}: validateKey`, async (t) => {
    const before = server.requests.length;
    t.same(await adapter.validateKey(creds), { valid: true });
    const check = server.requests[before]!;
    t.match(check, { method: 'GET', path: '/v1/models', apiKey: KEY }, 'the key travels as it does in a turn');
    if (name === 'anthropic') t.equal(check.headers['anthropic-version'], '2023-06-01');
    const wrong = await adapter.validateKey({ ...creds, apiKey: 'sk-wrong' });
    t.equal(wrong.valid, false);
    t.match(wrong, { reason: /refused the key/ });
    t.same(await adapter.validateKey({ baseUrl: server.url }), { valid: false, reason: 'no API key given' });
    const listed = server.requests.filter((r) => r.path === '/v1/models');
    t.ok(listed.length >= 2, 'validateKey lists models');
  });
}

t.test('openrouter checks the key at /key; ollama needs no key', async (t) => {
  const server = await startFakeOpenAI({ apiKey: KEY });
  t.teardown(server.close);
  const openrouter = providerFor('openrouter', { timeoutMs: TIMEOUT_MS, allowPrivateUrls });
  t.same(await openrouter.validateKey({ apiKey: KEY, baseUrl: server.url }), { valid: true });
  t.equal(server.requests.at(-1)!.path, '/v1/key');
  t.equal((await openrouter.validateKey({ apiKey: 'nope', baseUrl: server.url })).valid, false);

  const local = await startFakeOpenAI({ models: ['llama3.2'] });
  t.teardown(local.close);
  const ollama = providerFor('ollama', { baseUrls: { ollama: local.url } });
  t.equal(ollama.needsKey, false);
  t.same(await ollama.validateKey({}), { valid: true });
  local.enqueue({ reply: 'hi there' });
  const result = await ollama.complete(
    { model: 'llama3.2', messages: [{ role: 'user', content: 'hi' }], maxOutputTokens: 20 },
    {},
  );
  t.equal(result.text, 'hi there');
  t.match(local.requests.at(-1)!.body, { max_tokens: 20 }, 'compatible servers get max_tokens');
  t.equal(costMicros('ollama', 'llama3.2', result.inputTokens, result.outputTokens), 0);
});

t.test('an unreachable server is unavailable (retryable)', async (t) => {
  const server = await startFakeOpenAI();
  const url = server.url;
  await server.close();
  t.match(await providerFailure(openai.complete(ask('gpt-4o-mini'), { apiKey: KEY, baseUrl: url })), {
    kind: 'unavailable',
    retryable: true,
  });
});

t.test('builtin/offline answers without a key or a network, deterministically', async (t) => {
  const adapter = providerFor('builtin');
  t.equal(adapter, builtinAdapter);
  t.equal(adapter.needsKey, false);
  const request = { model: 'offline', messages: [{ role: 'user' as const, content: 'What is the plan for today?' }] };
  const deltas: string[] = [];
  const first = await adapter.complete({ ...request, onDelta: (d) => void deltas.push(d) }, {});
  t.match(first.text, /What is the plan for today\?/);
  t.ok(deltas.length > 1, 'streamed in several deltas');
  t.equal(deltas.join(''), first.text);
  t.equal(first.finishReason, 'stop');
  t.ok(first.inputTokens > 0 && first.outputTokens > 0);
  t.same(await adapter.complete(request, {}), first, 'the same question gets the same answer');
  t.same(await adapter.validateKey({}), { valid: true });
  t.equal(costMicros('builtin', 'offline', first.inputTokens, first.outputTokens), 0);
  const short = await adapter.complete({ ...request, maxOutputTokens: 3 }, {});
  t.equal(short.finishReason, 'length');
  t.ok(short.text.length <= 12);
});

t.test('registry: parseModel, providerFor, PROVIDERS, costMicros, defaultBaseUrl', async (t) => {
  t.same(parseModel('openai/gpt-4o-mini'), { provider: 'openai', model: 'gpt-4o-mini' });
  t.same(parseModel('builtin/offline'), { provider: 'builtin', model: 'offline' });
  t.same(parseModel('openrouter/anthropic/claude-3.5-haiku'), {
    provider: 'openrouter',
    model: 'anthropic/claude-3.5-haiku',
  });
  for (const bad of ['gpt-4o-mini', 'unknown/model', 'openai/', '/gpt', 'builtin/other', 'custom/x'])
    t.equal(parseModel(bad), null, bad);

  t.equal(providerFor('anthropic').id, 'anthropic');
  t.throws(() => providerFor('nope'), /unknown model provider/);
  t.same(
    PROVIDERS.map((p) => p.id),
    ['openai', 'anthropic', 'openrouter', 'ollama', 'builtin'],
  );
  t.same(
    PROVIDERS.filter((p) => p.needsKey).map((p) => p.id),
    ['openai', 'anthropic', 'openrouter'],
  );
  t.ok(PROVIDERS.every((p) => p.models.length > 0));
  t.match(modelInfo('openai', 'gpt-4o-mini'), { inputPricePerMTokMicros: 150_000, outputPricePerMTokMicros: 600_000 });

  t.equal(costMicros('openai', 'gpt-4o-mini', 1_000_000, 1_000_000), 750_000);
  t.equal(costMicros('anthropic', 'claude-sonnet-4-0', 1000, 500), 10_500);
  t.equal(costMicros('openai', 'gpt-4o-mini', 1, 0), 1, 'rounded up to a whole micro-dollar');
  t.equal(costMicros('openai', 'unknown-model', 1000, 1000), 0);
  t.equal(costMicros('nope', 'x', 1000, 1000), 0);

  const config = testConfig('postgres://unused/unused', { OLLAMA_BASE_URL: 'http://10.0.0.5:11434/v1' });
  t.equal(defaultBaseUrl(config, 'ollama'), 'http://10.0.0.5:11434/v1');
  t.equal(defaultBaseUrl(config, 'anthropic'), 'https://api.anthropic.com');
  t.equal(defaultBaseUrl(config, 'builtin'), undefined);
});
