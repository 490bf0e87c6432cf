// A local SMTP server for tests (smtp-server, no TLS, no authentication):
// keeps every message it accepts, and refuses a recipient with the reply
// code `refuse` names for it (e.g. 451 on the first try, 550 always).
import type { Test } from 'tap';
import { SMTPServer, type SMTPServerAddress } from 'smtp-server';

export type ReceivedMail = {
  from: string;
  to: string[];
  /** The message as it came over DATA. */
  raw: string;
  /** The Subject header, unfolded. */
  subject: string;
  /** The same with quoted-printable soft line breaks and escapes undone (good enough for ASCII text). */
  text: string;
};

/** The reply code to refuse `address` with on its `n`th RCPT TO (1-based), or null to accept it. */
export type RefuseRule = (address: string, n: number) => number | null;

/** A header of the message's header block, its folded lines joined ('' when absent). */
function header(raw: string, name: string): string {
  const end = raw.search(/\r?\n\r?\n/);
  const block = (end < 0 ? raw : raw.slice(0, end)).replace(/\r?\n[ \t]+/g, ' ');
  const line = block.split(/\r?\n/).find((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`));
  return line ? line.slice(name.length + 1).trim() : '';
}

const decodeQuotedPrintable = (raw: string) =>
  raw.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));

export async function startSmtpServer(t: Test, refuse: RefuseRule = () => null) {
  const messages: ReceivedMail[] = [];
  const tries = new Map<string, number>();
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS'],
    authOptional: true,
    logger: false,
    onRcptTo(address: SMTPServerAddress, _session, callback) {
      const key = address.address.toLowerCase();
      const n = (tries.get(key) ?? 0) + 1;
      tries.set(key, n);
      const code = refuse(key, n);
      if (code === null) return callback();
      const error = Object.assign(new Error(code >= 500 ? 'Mailbox unavailable' : 'Try again later'), {
        responseCode: code,
      });
      return callback(error);
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const envelope = session.envelope;
        messages.push({
          from: envelope.mailFrom ? envelope.mailFrom.address : '',
          to: envelope.rcptTo.map((r) => r.address.toLowerCase()),
          raw,
          subject: header(raw, 'subject'),
          text: decodeQuotedPrintable(raw),
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.server.address() as { port: number };
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    /** Messages accepted for `address`. */
    to: (address: string) => messages.filter((m) => m.to.includes(address.toLowerCase())),
    /** How many times `address` was given in RCPT TO. */
    tries: (address: string) => tries.get(address.toLowerCase()) ?? 0,
  };
}
