// The rules for the embedded cluster's directory, checked where they live
// (prepareClusterDirectory) without starting PostgreSQL: an earlier
// version's relocated cluster comes back into DATA_DIR/pg, a directory owned
// by someone else or holding other files stops the start with the fix, and
// nothing of anyone's is deleted. (test/ops/all-in-one.test.ts starts the
// real thing under a closed directory.)
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import {
  ClusterDirectoryError,
  legacyRelocatedDirectory,
  postgresUserIds,
  prepareClusterDirectory,
} from '../../ops/embedded-postgres-cluster.ts';
import pino from 'pino';
import { captureLog } from '../helpers/log-capture.ts';

const asRoot = { skip: process.getuid?.() !== 0 && 'only as root (PostgreSQL then runs as the postgres user)' };
const scratch = () => mkdtempSync(path.join(process.env.TEST_SCRATCH_DIR!, 'cluster-'));

t.test('a cluster an earlier version kept in the shared place moves back into DATA_DIR/pg', asRoot, async (t) => {
  const directory = path.join(scratch(), 'data', 'pg');
  const legacy = legacyRelocatedDirectory(directory);
  t.teardown(() => rmSync(legacy, { recursive: true, force: true }));
  mkdirSync(legacy, { recursive: true, mode: 0o700 });
  writeFileSync(path.join(legacy, 'PG_VERSION'), '18\n');
  const ids = postgresUserIds() as { uid: number; gid: number };
  chownSync(legacy, ids.uid, ids.gid); // as the relocation left it: the postgres user's
  const log = captureLog();
  prepareClusterDirectory(directory, pino(log.stream));
  t.equal(readFileSync(path.join(directory, 'PG_VERSION'), 'utf8'), '18\n', 'the cluster is DATA_DIR/pg again');
  t.notOk(existsSync(legacy), 'and no longer in the shared place');
  t.match(log.text(), /moved the cluster an earlier version kept in a shared place back into DATA_DIR/);
});

t.test('a cluster directory owned by someone else stops the start with the fix', asRoot, async (t) => {
  const directory = path.join(scratch(), 'pg');
  mkdirSync(directory);
  writeFileSync(path.join(directory, 'PG_VERSION'), '18\n'); // root's, copied in by hand: PostgreSQL would refuse it
  t.throws(() => prepareClusterDirectory(directory), ClusterDirectoryError);
  t.throws(() => prepareClusterDirectory(directory), {
    message: `embedded postgres: ${directory} belongs to uid 0, but the embedded PostgreSQL runs as the system user postgres`,
  });
  t.throws(() => prepareClusterDirectory(directory), {
    message: new RegExp(`chown -R postgres:postgres ${directory}`),
  });
  t.ok(existsSync(path.join(directory, 'PG_VERSION')), 'nothing changed');
});

t.test('a DATA_DIR/pg holding something else is refused, not deleted', async (t) => {
  const directory = path.join(scratch(), 'pg');
  mkdirSync(directory);
  writeFileSync(path.join(directory, 'notes.txt'), 'mine\n');
  t.throws(() => prepareClusterDirectory(directory), {
    message: /is not empty and holds no PostgreSQL cluster \(notes\.txt\)/,
  });
  t.ok(existsSync(path.join(directory, 'notes.txt')), 'nothing deleted');
});

t.test('what an interrupted initdb left is cleared, so the next start begins again', async (t) => {
  const directory = path.join(scratch(), 'pg');
  mkdirSync(path.join(directory, 'base'), { recursive: true });
  writeFileSync(path.join(directory, 'postgresql.conf'), '');
  prepareClusterDirectory(directory);
  t.notOk(existsSync(path.join(directory, 'base')), 'the half-made cluster is gone');
});
