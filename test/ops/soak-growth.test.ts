// The soak's memory verdict (ops/soak/invariants-growth.ts): each process is
// judged after its own warm-up, so one restarted by a fault, which starts
// small and fills up like the others did, is not taken for a leak.
import t from 'tap';
import { memoryInvariant, type MemorySample } from '../../ops/soak/invariants-growth.ts';

const MINUTE = 60_000;
/** Samples every 5 s over 10 minutes: `mb(name, minute)` for each process alive then. */
const samples = (mb: (name: string, minute: number) => number | undefined): MemorySample[] =>
  Array.from({ length: 121 }, (_, i) => {
    const minute = (i * 5_000) / MINUTE;
    const at: Record<string, number> = {};
    for (const name of ['api', 'worker#1', 'worker#2']) {
      const v = mb(name, minute);
      if (v !== undefined) at[name] = v;
    }
    return { at: i * 5_000, mb: at };
  });

t.test(
  'a process restarted at 1.5 min that warms up from 180 to 270 MiB over 2 min, then stays level: held',
  async (t) => {
    const verdict = memoryInvariant(
      samples((name, m) => {
        if (name === 'api') return 260;
        if (name === 'worker#1') return m < 1.5 ? 265 : undefined;
        if (name === 'worker#2') return m < 1.5 ? undefined : Math.min(270, 180 + (m - 1.5) * 45);
      }),
      2 * MINUTE,
    );
    t.same(verdict.violations, []);
    t.equal(verdict.checked, 2, 'the api and the restarted worker judged (the first worker lived too short)');
  },
);

t.test('a process that keeps growing after its warm-up: violated', async (t) => {
  const verdict = memoryInvariant(
    samples((name, m) => (name === 'api' ? 200 + m * 12 : undefined)),
    2 * MINUTE,
  );
  t.equal(verdict.violations.length, 1);
  t.match(verdict.violations[0], /^api: \+120\.0 MiB per 10 min/);
});
