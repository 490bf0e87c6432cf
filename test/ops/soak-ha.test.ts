// `npm run soak -- --ha --minutes 0.75 --ha-faults switchover,lose-primary`:
// the soak's load (chat sends, channel messages, agent mutations, billing)
// on three Patroni members with synchronous replication behind HAProxy, one
// planned switchover and one loss of the primary's machine, every invariant
// held: nothing acknowledged lost, nothing run twice, no job left locked or
// unfinished, followers saw every final state, only 503s with Retry-After
// while there was no primary. Needs Debian's patroni, etcd-server, haproxy
// and postgresql (.ci/run installs them); without them it skips. Without
// them `npm run soak -- --ha` itself says what to install.
import { execFileSync } from 'node:child_process';
import { symlinkSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { missingHaPackages } from '../../ops/ha/packages.ts';
import { runSoak } from '../helpers/soak-run.ts';

t.test('without the packages, --ha says which to install and starts nothing', async (t) => {
  // A PATH with node, npm and sh only: no etcd, patroni or haproxy on it.
  const bin = t.testdir({});
  for (const command of ['node', 'npm', 'sh']) {
    const found = execFileSync('sh', ['-c', `command -v ${command}`], { encoding: 'utf8' }).trim();
    symlinkSync(found, path.join(bin, command));
  }
  const { code, output } = await runSoak(t, ['--ha', '--minutes', '0.1'], { PATH: bin });
  t.equal(code, 1, 'exit code 1');
  t.match(output, /this machine lacks etcd-server, patroni, haproxy\b/, 'names the packages');
  t.match(output, /apt-get install etcd-server patroni haproxy\b/, 'and how to install them');
  t.notMatch(output, /ENOENT|\n\s+at /, 'no stack');
  t.notMatch(output, /starting the replicated PostgreSQL/, 'nothing started');
});

const missing = missingHaPackages();
if (missing.length > 0) {
  t.test(
    'a soak on a replicated PostgreSQL',
    { skip: `needs ${missing.join(', ')} (apt-get install ${missing.join(' ')})` },
    () => {},
  );
} else {
  t.setTimeout(400_000);
  t.test('a switchover and a lost primary under load: every invariant holds', async (t) => {
    const { code, output } = await runSoak(t, ['--ha', '--minutes', '0.75', '--ha-faults', 'switchover,lose-primary']);
    t.equal(code, 0, 'exit code 0');
    t.match(output, /PostgreSQL replicated \(3 Patroni members, synchronous, through HAProxy\)/);
    t.match(output, /^ {2}\d+ s: planned switchover[^\n]*pg\d → pg\d in [\d.]+ s/m, 'the switchover happened');
    t.match(
      output,
      /^ {2}\d+ s: the primary's machine lost[^\n]*pg\d lost; pg\d primary after [\d.]+ s/m,
      'the primary was lost and replaced',
    );
    t.match(
      output,
      /\| lose-primary \| 1 \| [\d.]+ s \/ [\d.]+ s \| [\d.]+ s \/ [\d.]+ s \| [\d.]+ s \/ [\d.]+ s \|/,
      'its recovery times are reported',
    );
    t.match(
      output,
      /\| nothing acknowledged was lost \(every 2xx send and mutation is there\) \| [1-9]\d* \| 0 \|/,
      'acknowledged writes were checked',
    );
    t.match(
      output,
      /\| every accepted channel message got one reply at the receiver[^|]*\| [1-9]\d* \| 0 \|/,
      'channel messages were checked',
    );
    t.match(
      output,
      /\| every websocket follower saw its job's final state[^|]*\| [1-9]\d* \| 0 \|/,
      'followers were checked',
    );
    t.match(output, /\ninvariants: all held\n/);
  });
}
