// package.json's engines promise a Node version; every installed package
// (runtime and test tooling) must accept the oldest Node that promise allows,
// so `npm ci` on that version neither warns nor runs code that declares it
// needs a newer one.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import semver from 'semver';
import t from 'tap';
import { sourceRoot } from '../helpers/paths.ts';

type Lock = { packages: Record<string, { version?: string; engines?: { node?: string } | string[] }> };
const pkg = JSON.parse(readFileSync(path.join(sourceRoot, 'package.json'), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(path.join(sourceRoot, 'package-lock.json'), 'utf8')) as Lock;

t.test('every package in the lock file accepts the oldest Node that engines allows', async (t) => {
  const oldest = semver.minVersion(pkg.engines.node);
  t.ok(oldest, `engines.node ${pkg.engines.node} has a lowest version`);
  t.ok(
    semver.satisfies(process.version, pkg.engines.node),
    `the Node running the tests (${process.version}) is allowed`,
  );
  const refusing = Object.entries(lock.packages)
    .filter(([name, entry]) => name && entry.engines && !Array.isArray(entry.engines) && entry.engines.node)
    .filter(
      ([, entry]) => !semver.satisfies(oldest!, (entry.engines as { node: string }).node, { includePrerelease: true }),
    )
    .map(
      ([name, entry]) =>
        `${name.replace(/^.*node_modules\//, '')}@${entry.version} needs node ${(entry.engines as { node: string }).node}`,
    );
  t.same(refusing, [], `packages that refuse Node ${oldest}`);
});
