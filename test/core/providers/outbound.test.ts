// The outbound policy for tenant-supplied provider URLs: which addresses are
// not public, the save-time check, and the connection-time check inside the
// adapters (DNS rebinding, literal IPs, redirects), against real local servers.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { lookup } from 'node:dns';
import t from 'tap';
import { classifyAddress } from '../../../core/providers/addresses.ts';
import { createAnthropicAdapter } from '../../../core/providers/anthropic.ts';
import { createOpenAICompatibleAdapter } from '../../../core/providers/openai.ts';
import {
  createGuardedFetch,
  OutboundBlockedError,
  blockedCause,
  tenantBaseUrlProblem,
} from '../../../core/providers/outbound.ts';
import { ProviderError } from '../../../core/providers/types.ts';
import { startFakeAnthropic, startFakeOpenAI } from '../../helpers/fake-providers.ts';

const KEY = 'sk-test-key';
const openaiServer = await startFakeOpenAI({ apiKey: KEY, models: ['gpt-4o-mini'] });
const anthropicServer = await startFakeAnthropic({ apiKey: KEY, models: ['claude-3-5-haiku-latest'] });
t.teardown(() => Promise.all([openaiServer.close(), anthropicServer.close()]));

/** A resolver that answers every name with `address` (a DNS answer we choose). */
const resolvesTo = (address: string) =>
  ((_host: string, _options: unknown, callback: (e: null, a: Array<{ address: string; family: number }>) => void) =>
    callback(null, [{ address, family: address.includes(':') ? 6 : 4 }])) as unknown as typeof lookup;

t.test('classifyAddress: IPv4, IPv6 and IPv6 forms that carry IPv4', async (t) => {
  const cases: Array<[string, string | null]> = [
    ['127.0.0.1', 'loopback'],
    ['127.8.9.10', 'loopback'],
    ['10.0.0.5', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['100.64.0.1', 'shared'],
    ['100.127.255.255', 'shared'],
    ['0.0.0.0', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['fe80::1', 'link-local'],
    ['febf::1', 'link-local'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456::1', 'unique-local'],
    ['ff02::1', 'multicast'],
    ['fe80::1%eth0', 'link-local'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:a9fe:a9fe', 'link-local'],
    ['::ffff:10.1.2.3', 'private'],
    ['::127.0.0.1', 'loopback'],
    ['64:ff9b::169.254.169.254', 'link-local'],
    ['2002:c0a8:0101::1', 'private'],
    ['::ffff:0:127.0.0.1', 'loopback'],
    ['::ffff:0:a9fe:a9fe', 'link-local'],
    ['192.88.99.1', 'reserved'],
    // Public: nothing to say.
    ['1.1.1.1', null],
    ['8.8.8.8', null],
    ['172.32.0.1', null],
    ['100.128.0.1', null],
    ['2606:4700:4700::1111', null],
    ['::ffff:8.8.8.8', null],
    ['64:ff9b::8.8.8.8', null],
  ];
  for (const [address, expected] of cases) t.equal(classifyAddress(address), expected, address);
  t.throws(() => classifyAddress('example.com'), /not an IP address/);
});

t.test('save-time check: the reason names what is wrong; the switch allows private addresses only', async (t) => {
  const refused: Array<[string, RegExp]> = [
    ['http://127.0.0.1:11434/v1', /127\.0\.0\.1 is a loopback address/],
    ['http://169.254.169.254/', /link-local .*metadata/],
    ['http://[::1]/', /::1 is a loopback address/],
    ['http://10.0.0.5/', /private network/],
    ['http://100.64.1.1/', /carrier-grade NAT/],
    ['http://[fd00::2]/v1', /unique-local/],
    ['http://[::ffff:127.0.0.1]/', /loopback/],
    ['http://0x7f.1/', /127\.0\.0\.1 is a loopback/], // the URL parser's spelling of 127.0.0.1
    ['http://localhost:8080/v1', /localhost is a loopback name/],
    ['http://models.localhost/', /loopback name/],
    ['http://user:pass@models.example.com/', /user name or password/],
    ['ftp://models.example.com/', /http:\/\/ or https:\/\//],
  ];
  for (const [url, reason] of refused) t.match(await tenantBaseUrlProblem(url), reason, url);
  t.match(
    await tenantBaseUrlProblem('https://internal.example.com/v1', { lookup: resolvesTo('192.168.0.7') }),
    /internal\.example\.com resolves to 192\.168\.0\.7, a private network address/,
  );
  t.equal(await tenantBaseUrlProblem('https://models.example.com/v1', { lookup: resolvesTo('93.184.215.14') }), null);
  t.equal(await tenantBaseUrlProblem('https://1.1.1.1/v1'), null);

  for (const url of [
    'http://127.0.0.1:11434/v1',
    'http://169.254.169.254/',
    'http://[::1]/',
    'http://10.0.0.5/',
    'http://localhost/',
  ]) {
    t.equal(await tenantBaseUrlProblem(url, { allowPrivateUrls: true }), null, `${url} with the switch on`);
  }
  t.match(
    await tenantBaseUrlProblem('http://user:pass@10.0.0.5/', { allowPrivateUrls: true }),
    /user name or password/,
    'credentials never',
  );
});

const openaiAdapter = (defaultBaseUrl: string, allowPrivateUrls = false) =>
  createOpenAICompatibleAdapter({
    id: 'openai',
    displayName: 'OpenAI',
    defaultBaseUrl,
    needsKey: true,
    models: [],
    timeoutMs: 10_000,
    allowPrivateUrls,
  });
const anthropicAdapter = (defaultBaseUrl: string, allowPrivateUrls = false) =>
  createAnthropicAdapter({ defaultBaseUrl, models: [], timeoutMs: 10_000, allowPrivateUrls });
const ask = (model: string) => ({ model, messages: [{ role: 'user' as const, content: 'hi' }] });

async function refusal(promise: Promise<unknown>): Promise<ProviderError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof ProviderError)) throw new Error(`expected a ProviderError, got ${String(error)}`);
  return error;
}

const protocols = [
  { name: 'openai', make: openaiAdapter, server: openaiServer, model: 'gpt-4o-mini' },
  { name: 'anthropic', make: anthropicAdapter, server: anthropicServer, model: 'claude-3-5-haiku-latest' },
];

for (const { name, make, server, model } of protocols) {
  t.test(`${name}: a tenant baseUrl that leads to a private address is refused at connect time`, async (t) => {
    const adapter = make('https://api.provider.example');
    const before = server.requests.length;
    // localhost stands in for a name that resolved publicly when it was saved.
    for (const baseUrl of [
      server.url.replace('127.0.0.1', 'localhost'),
      server.url,
      server.url.replace('127.0.0.1', '[::ffff:127.0.0.1]'),
    ]) {
      const check = await refusal(adapter.validateKey({ apiKey: KEY, baseUrl }));
      t.match(
        check,
        { kind: 'unavailable', retryable: true, message: /provider address is not allowed: .*loopback/ },
        `validateKey ${baseUrl}`,
      );
      t.match(
        await refusal(adapter.complete(ask(model), { apiKey: KEY, baseUrl })),
        { kind: 'unavailable', message: /not allowed/ },
        `complete ${baseUrl}`,
      );
    }
    t.equal(server.requests.length, before, 'the server never saw a request');
  });

  t.test(`${name}: a base URL refused by its form, or malformed, fails the call as a provider refusal`, async (t) => {
    const adapter = make('https://api.provider.example');
    for (const baseUrl of ['https://user:secret@api.provider.example/v1', 'not a url']) {
      t.match(await refusal(adapter.complete(ask(model), { apiKey: KEY, baseUrl })), { kind: 'unavailable' }, baseUrl);
      t.match(await refusal(adapter.validateKey({ apiKey: KEY, baseUrl })), { kind: 'unavailable' }, baseUrl);
    }
  });

  t.test(`${name}: the operator's endpoint is trusted; the switch lets a tenant's private URL through`, async (t) => {
    t.same(await make(server.url).validateKey({ apiKey: KEY }), { valid: true }, 'configured default on 127.0.0.1');
    t.same(
      await make(server.url).validateKey({ apiKey: KEY, baseUrl: server.url }),
      { valid: true },
      'a credential naming the default',
    );
    server.enqueue({ reply: 'allowed here' });
    const local = server.url.replace('127.0.0.1', 'localhost');
    t.match(await make('https://api.provider.example', true).complete(ask(model), { apiKey: KEY, baseUrl: local }), {
      text: 'allowed here',
    });
  });
}

t.test(
  'guarded fetch: connects where the lookup says, and refuses when the name turns private (DNS rebinding)',
  async (t) => {
    const port = new URL(openaiServer.url).port;
    const models = `http://provider.test:${port}/v1/models`;
    const init = { headers: { authorization: `Bearer ${KEY}` } };

    // A classifier that finds nothing private stands in for a public answer, so the fake server is reachable by name.
    const before = openaiServer.requests.length;
    const publicGuard = createGuardedFetch({ lookup: resolvesTo('127.0.0.1'), classify: () => null });
    const response = await publicGuard(models, init);
    t.equal(response.status, 200);
    t.match(await response.json(), { data: [{ id: 'gpt-4o-mini' }] }, 'the answer came through the guarded fetch');
    t.equal(openaiServer.requests.length, before + 1);

    // The save-time check passed for a public answer; at call time the name answers with the metadata address.
    t.equal(
      await tenantBaseUrlProblem(`http://provider.test:${port}/v1`, { lookup: resolvesTo('93.184.215.14') }),
      null,
    );
    const rebound = createGuardedFetch({ lookup: resolvesTo('169.254.169.254') });
    const error = await rebound(models, init).then(
      () => null,
      (e: unknown) => e,
    );
    t.match(blockedCause(error), {
      message: 'provider.test resolves to 169.254.169.254, a link-local address (such as the cloud metadata service)',
    });
    t.equal(openaiServer.requests.length, before + 1, 'nothing reached the server');
  },
);

t.test('guarded fetch: a redirect to a private literal IP is refused at connect', async (t) => {
  const redirector = createServer((_req, res) =>
    res.writeHead(302, { location: 'http://127.0.0.1/latest/meta-data/' }).end(),
  );
  await new Promise<void>((resolve) => redirector.listen(0, '127.0.0.2', resolve));
  t.teardown(() => redirector.close());
  const guarded = createGuardedFetch({ classify: (a) => (a === '127.0.0.1' ? 'loopback' : null) });
  const error = await guarded(`http://127.0.0.2:${(redirector.address() as AddressInfo).port}/v1/models`).then(
    () => null,
    (e: unknown) => e,
  );
  t.ok(blockedCause(error) instanceof OutboundBlockedError, String(error));
  t.match(blockedCause(error), { message: '127.0.0.1 is a loopback address' });
  await t.rejects(
    createGuardedFetch()('http://user:pw@example.com/'),
    /user name or password/,
    'credentials in a URL never leave',
  );
});
