// A writable stream that keeps what a logger writes, for tests that check log lines.
import { Writable } from 'node:stream';

export function captureLog() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { stream, text: () => lines.join('') };
}
