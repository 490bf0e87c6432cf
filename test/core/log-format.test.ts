// LOG_FORMAT: readable lines (pino-pretty) when asked for, or in development
// on a terminal; JSON otherwise and always in tests. Readable lines are
// redacted like JSON ones.
import t from 'tap';
import { createLogger, wantsPrettyLogs } from '../../core/logger.ts';
import { captureLog } from '../helpers/log-capture.ts';

const capture = captureLog;
const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

t.test('which format', async (t) => {
  t.equal(
    wantsPrettyLogs({ format: 'pretty', nodeEnv: 'production', isTTY: false }),
    true,
    'pretty is pretty anywhere',
  );
  t.equal(wantsPrettyLogs({ format: 'json', nodeEnv: 'development', isTTY: true }), false);
  t.equal(
    wantsPrettyLogs({ format: 'auto', nodeEnv: 'development', isTTY: true }),
    true,
    'auto: development on a terminal',
  );
  t.equal(
    wantsPrettyLogs({ format: 'auto', nodeEnv: 'development', isTTY: false }),
    false,
    'auto: piped output stays JSON',
  );
  t.equal(wantsPrettyLogs({ format: 'auto', nodeEnv: 'production', isTTY: true }), false);
  t.equal(wantsPrettyLogs({ format: 'auto', nodeEnv: 'test', isTTY: true }), false, 'never in tests');
  t.equal(wantsPrettyLogs(), false, 'no format given: JSON');
});

t.test('pretty lines are readable, not JSON, and still redacted', async (t) => {
  const out = capture();
  const log = createLogger('info', 'pretty-test', { format: 'pretty', destination: out.stream, isTTY: false });
  log.info(
    { req: { headers: { authorization: 'Bearer SECRET-PRETTY-1' } }, body: { password: 'SECRET-PRETTY-2' } },
    'hello readable world',
  );
  await settle();
  const text = out.text();
  t.match(text, /INFO.*hello readable world/);
  t.throws(() => JSON.parse(text.split('\n')[0]!), 'the first line is not JSON');
  t.notMatch(text, /SECRET-PRETTY/);
  t.match(text, /\[redacted\]/);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: an ANSI colour starts with ESC
  t.notMatch(text, /\u001b\[/, 'no colours when the destination is not a terminal');
});

t.test('json (and auto outside development) stays one JSON object per line', async (t) => {
  for (const format of ['json', 'auto'] as const) {
    const out = capture();
    const log = createLogger('info', 'json-test', { format, nodeEnv: 'test', destination: out.stream, isTTY: true });
    log.info({ req: { headers: { authorization: 'Bearer SECRET-JSON' } } }, 'hello json');
    await settle();
    const line = JSON.parse(out.text().trim()) as {
      msg: string;
      name: string;
      req: { headers: { authorization: string } };
    };
    t.equal(line.msg, 'hello json', format);
    t.equal(line.req.headers.authorization, '[redacted]');
  }
});
