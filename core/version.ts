// The platform's version (package.json), for worker heartbeats and the
// console. Found from the source tree (core/) and from the build (dist/core/).
import { readFileSync } from 'node:fs';

function readVersion(): string {
  for (const candidate of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(candidate, import.meta.url), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.version && pkg.name !== undefined) return pkg.version;
    } catch {
      // not at this level
    }
  }
  return 'unknown';
}

export const PLATFORM_VERSION = readVersion();
