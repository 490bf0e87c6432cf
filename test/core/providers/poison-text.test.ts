// A model answer holding what PostgreSQL cannot store (NUL, a lone
// surrogate, sent as raw JSON escapes in the stream's data: the fake server's
// JSON.stringify writes them as \u0000 and \ud800) comes out of
// either protocol storable, in its deltas and its final text alike; a
// surrogate pair cut between two deltas stays whole.
import t from 'tap';
import { createAnthropicAdapter } from '../../../core/providers/anthropic.ts';
import { createOpenAICompatibleAdapter } from '../../../core/providers/openai.ts';
import type { ProviderAdapter } from '../../../core/providers/types.ts';
import { startFakeAnthropic, startFakeOpenAI, type FakeProvider } from '../../helpers/fake-providers.ts';

const KEY = 'sk-test-key';
const openaiServer = await startFakeOpenAI({ apiKey: KEY });
const anthropicServer = await startFakeAnthropic({ apiKey: KEY });
t.teardown(() => Promise.all([openaiServer.close(), anthropicServer.close()]));

const options = { models: [], timeoutMs: 10_000, allowPrivateUrls: true };
const protocols: Array<{ name: string; adapter: ProviderAdapter; server: FakeProvider; model: string }> = [
  {
    name: 'openai',
    adapter: createOpenAICompatibleAdapter({
      id: 'openai',
      displayName: 'OpenAI',
      defaultBaseUrl: 'http://127.0.0.1:9/v1',
      needsKey: true,
      ...options,
    }),
    server: openaiServer,
    model: 'gpt-4o-mini',
  },
  {
    name: 'anthropic',
    adapter: createAnthropicAdapter({ defaultBaseUrl: 'http://127.0.0.1:9', ...options }),
    server: anthropicServer,
    model: 'claude-3-5-haiku-latest',
  },
];

const cases: Array<{ pieces: string[]; text: string }> = [
  { pieces: ['before\u0000after'], text: 'beforeafter' },
  { pieces: ['half ', '\ud800', ' pair'], text: 'half \ufffd pair' },
  { pieces: ['smile \ud83d', '\ude00 done'], text: 'smile \ud83d\ude00 done' },
  { pieces: ['ends on half \ud83d'], text: 'ends on half \ufffd' },
];

for (const p of protocols) {
  t.test(`${p.name}: poison in the stream comes out storable`, async (t) => {
    for (const c of cases) {
      p.server.enqueue({ pieces: c.pieces });
      const deltas: string[] = [];
      const result = await p.adapter.complete(
        { model: p.model, messages: [{ role: 'user', content: 'Hi' }], onDelta: (d) => void deltas.push(d) },
        { apiKey: KEY, baseUrl: p.server.url },
      );
      t.equal(result.text, c.text, JSON.stringify(c.pieces));
      t.equal(deltas.join(''), c.text, 'the deltas add up to the answer');
    }
  });
}
