// The statement batcher on its own: who goes in which run, what a failed run
// does, and that the next run starts (and reaches the database) before the
// last one's callers hear back.
import t from 'tap';
import { StatementBatcher, type ItemOutcome } from '../../../core/db/batcher.ts';

type Run = { items: string[]; finish: (fail?: Error) => void };

/** A batcher whose runs the test finishes by hand. */
function manual(options: { maxInFlight?: number; key?: (item: string) => string } = {}) {
  const runs: Run[] = [];
  const log: string[] = [];
  const batcher = new StatementBatcher<string, string>(
    (items) =>
      new Promise<Array<ItemOutcome<string>>>((resolve, reject) => {
        log.push(`run ${items.join('+')}`);
        runs.push({
          items: [...items],
          finish: (fail) =>
            fail
              ? reject(fail)
              : resolve(
                  items.map((item) =>
                    item.startsWith('bad')
                      ? { ok: false, error: new Error(item) }
                      : { ok: true, value: item.toUpperCase() },
                  ),
                ),
        });
      }),
    { what: 'test writes', maxInFlight: options.maxInFlight ?? 1, ...(options.key ? { key: options.key } : {}) },
  );
  const submit = (item: string) =>
    batcher.submit(item).then(
      (value) => void log.push(`answered ${item}=${value}`),
      (error: Error) => void log.push(`failed ${item}: ${error.message}`),
    );
  return { runs, log, submit };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

t.test('a lone item goes at once; items that arrive meanwhile go together next', async (t) => {
  const { runs, log, submit } = manual();
  const a = submit('a');
  t.same(
    runs.map((r) => r.items),
    [['a']],
    'the first item waits for nothing',
  );
  const rest = [submit('b'), submit('c')];
  await settle();
  t.equal(runs.length, 1, 'one run in flight at a time');
  runs[0]!.finish();
  await settle();
  t.same(runs[1]!.items, ['b', 'c']);
  runs[1]!.finish();
  await Promise.all([a, ...rest]);
  t.same(log.filter((l) => l.startsWith('answered')).sort(), ['answered a=A', 'answered b=B', 'answered c=C']);
});

t.test('the next run starts before the finished run’s callers are answered', async (t) => {
  const { runs, log, submit } = manual();
  const first = submit('a');
  const second = submit('b');
  runs[0]!.finish();
  await first;
  t.ok(log.indexOf('run b') >= 0 && log.indexOf('run b') < log.indexOf('answered a=A'), `order: ${log.join(', ')}`);
  runs[1]!.finish();
  await second;
});

t.test('the next run reaches the database before the finished run’s callers resume', async (t) => {
  // Like a driver, each run passes through many promise steps before its
  // statement is written. Those steps must not wait behind the answers.
  const log: string[] = [];
  const finishers: Array<() => void> = [];
  const batcher = new StatementBatcher<string, string>(
    async (items) => {
      for (let step = 0; step < 25; step++) await null;
      log.push(`sent ${items.join('+')}`);
      await new Promise<void>((resolve) => finishers.push(resolve));
      return items.map((item) => ({ ok: true as const, value: item }));
    },
    { what: 'test writes', maxInFlight: 1 },
  );
  const answer = (item: string) =>
    batcher.submit(item).then(async () => {
      log.push(`answered ${item}`);
      for (let step = 0; step < 25; step++) await null; // the answer's own work
      log.push(`written ${item}`);
    });
  const first = answer('a');
  const rest = [answer('b'), answer('c')];
  await settle();
  finishers[0]!();
  await first;
  t.ok(log.indexOf('sent b+c') < log.indexOf('answered a'), `order: ${log.join(', ')}`);
  finishers[1]!();
  await Promise.all(rest);
  t.same(
    log.filter((l) => l.startsWith('written')),
    ['written a', 'written b', 'written c'],
  );
});

t.test('an item that fails alone fails only itself; a run that throws is run again item by item', async (t) => {
  const { runs, log, submit } = manual();
  const first = submit('x');
  const batch = [submit('bad-1'), submit('ok-2'), submit('ok-3')];
  runs[0]!.finish();
  await first;
  await settle();
  runs[1]!.finish(new Error('the statement broke'));
  await settle();
  t.same(
    runs.slice(2).map((r) => r.items),
    [['bad-1'], ['ok-2'], ['ok-3']],
    'each item of the broken run on its own',
  );
  for (const run of runs.slice(2)) run.finish();
  await Promise.all(batch);
  t.same(log.filter((l) => !l.startsWith('run')).sort(), [
    'answered ok-2=OK-2',
    'answered ok-3=OK-3',
    'answered x=X',
    'failed bad-1: bad-1',
  ]);
});

t.test('items with the same key never share a run', async (t) => {
  const { runs, submit } = manual({ key: (item) => item.split(':')[0]! });
  const all = [submit('t1:a')];
  all.push(submit('t1:b'), submit('t2:c'), submit('t1:d'));
  runs[0]!.finish();
  await settle();
  t.same(runs[1]!.items, ['t1:b', 't2:c'], 'one item of each key');
  runs[1]!.finish();
  await settle();
  t.same(runs[2]!.items, ['t1:d']);
  runs[2]!.finish();
  await Promise.all(all);
});
