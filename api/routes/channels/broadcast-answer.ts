// One change can wake many link/wait requests at once (every tab and script
// that waits on the same channel), all with the same answer. Node's
// ServerResponse costs tens of microseconds per answer before its bytes
// leave, so the thousandth waiter heard of the change only after a thousand
// of them. A crowd's answers are therefore written straight to their
// sockets, complete HTTP/1.1 responses built from one serialized body, each
// ending its connection (`Connection: close`: the response object is never
// ended, so the connection is not reused; every HTTP client opens a new one).
// The headers a normal answer would carry are kept: those the request's hooks
// set (CORS), the request id, the date.
import type { FastifyReply } from 'fastify';

/** Woken together with at least this many others, an answer takes the raw path. */
export const CROWD = 32;

/**
 * `body`: JSON in ASCII (the answer's bytes are its characters). Fastify's
 * onResponse hooks (metrics, the request's log line) do not run for it: the
 * caller's `observe` does that.
 */
export function answerRaw(
  reply: FastifyReply,
  body: string,
  contentType: string,
  observe: (status: number) => void,
): void {
  const socket = reply.raw.socket;
  if (!socket || socket.destroyed || !socket.writable) {
    reply.type(contentType).send(body);
    return;
  }
  reply.hijack();
  let head = `HTTP/1.1 200 OK\r\ncontent-type: ${contentType}\r\ncontent-length: ${body.length}\r\nx-request-id: ${reply.request.id}\r\ndate: ${httpDate()}\r\nconnection: close\r\n`;
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (value === undefined || OWN.has(name)) continue;
    for (const one of Array.isArray(value) ? value : [value]) head += `${name}: ${one}\r\n`;
  }
  socket.write(`${head}\r\n${body}`, 'latin1');
  // Ended and counted after the crowd's writes (a shutdown is one more system call each).
  setImmediate(() => {
    socket.end();
    observe(200);
  });
}

const OWN = new Set(['content-type', 'content-length', 'x-request-id', 'date', 'connection']);

let cachedDate = { second: -1, text: '' };
/** The Date header, formatted once a second (a crowd is answered within one). */
function httpDate(): string {
  const second = Math.floor(Date.now() / 1000);
  if (second !== cachedDate.second) cachedDate = { second, text: new Date(second * 1000).toUTCString() };
  return cachedDate.text;
}
