// Graphile Worker's log lines through ours: what heals by itself is a
// one-line warning, a parked job is no failure, everything else keeps its level.
import { Writable } from 'node:stream';
import pino from 'pino';
import t from 'tap';
import { graphileLogger } from '../../core/graphile-logger.ts';

function capture() {
  const lines: Array<{ level: number; msg: string }> = [];
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk, _e, done) {
        lines.push(JSON.parse(String(chunk)));
        done();
      },
    }),
  );
  return { lines, log: graphileLogger(logger) };
}
const unreachable = Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });

t.test(
  'a completion batch lost while the database was away is a warning (the pools restart on its event)',
  async (t) => {
    const { lines, log } = capture();
    log.error("Failed to complete jobs '303':\nError: Connection terminated unexpectedly", {
      fatalError: unreachable,
      jobs: [],
    });
    log.error("Failed to fail jobs '12':\nError: Connection terminated unexpectedly", {
      fatalError: unreachable,
      specs: [],
    });
    await new Promise((r) => setImmediate(r));
    t.same(
      lines.map((l) => l.level),
      [40, 40],
    );
    t.match(lines[0]!.msg, /could not record finished jobs while the database was away/);
  },
);

t.test("the same loss for another reason stays an error; the I/O lane's small fetch batch is debug", async (t) => {
  const { lines, log } = capture();
  log.error("Failed to complete jobs '303':\nError: syntax error", { fatalError: new Error('syntax error'), jobs: [] });
  log.warn(
    'Your job batch size (4) is smaller than your concurrency setting (1000); this may result in drastically lower performance',
  );
  await new Promise((r) => setImmediate(r));
  t.same(
    lines.map((l) => l.level),
    [50, 20],
  );
});
