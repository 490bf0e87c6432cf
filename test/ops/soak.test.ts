// `npm run soak -- --minutes 1 --faults`, as docs/operations.md shows it: 2 apis and 2
// workers on the soak's own PostgreSQL under load for 60 s, with every fault
// of the schedule (processes killed and frozen, PostgreSQL restarted both
// ways, LISTEN connections dropped), must end with every invariant held.
import t from 'tap';
import { runSoak } from '../helpers/soak-run.ts';

t.setTimeout(400_000);

t.test('a 60-second soak with faults: every invariant holds', async (t) => {
  const { code, output } = await runSoak(t, ['--minutes', '1', '--faults']);
  t.equal(code, 0, 'exit code 0');
  t.match(output, /^ {2}fault at \d+ s: SIGKILL worker 1/m, 'the schedule is printed before the run');
  for (const fault of [
    'SIGKILL worker 1',
    'SIGKILL api 2',
    'SIGSTOP worker 2',
    'PostgreSQL fast shutdown',
    'PostgreSQL immediate shutdown',
    'LISTEN connection terminated',
  ]) {
    t.match(output, new RegExp(`^ {2}\\d+ s: [^\\n]*${fault}`, 'm'), `injected: ${fault}`);
  }
  t.match(output, /\| every send answered 202 has exactly one answer \| [1-9]\d* \| 0 \|/, 'sends were checked');
  t.match(
    output,
    /\| every Idempotency-Key replay got the first answer byte for byte \| [1-9]\d* \| 0 \|/,
    'replays were checked',
  );
  t.match(
    output,
    /\| every accepted channel message got one reply at the receiver[^|]*\| [1-9]\d* \| 0 \|/,
    'channel replies were checked',
  );
  t.match(
    output,
    /\| every Stripe event was stored once and applied[^|]*\| [1-9]\d* \| 0 \|/,
    'Stripe events were checked',
  );
  t.match(
    output,
    /\| every plan change happened once, and each plan is Stripe's \| [1-9]\d* \| 0 \|/,
    'plan changes were checked',
  );
  t.match(
    output,
    /\| cron fired every minute, each run once across both workers[^|]*\| \d+ \| 0 \|/,
    'cron was checked',
  );
  t.match(output, /\ninvariants: all held\n/);
});
