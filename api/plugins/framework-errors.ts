// Errors Fastify and Node raise before a route or our error handler runs:
// a URL with bad percent-encoding, an over-long path parameter, and HTTP that
// does not parse (or arrives too slowly, or with too many header bytes).
// Without these handlers they leave in Fastify's own shape; with them every
// one is in the shape of the surface its URL belongs to, or a page for a
// browser.
import type { Socket } from 'node:net';
import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { html, sendPage } from '../pages/layout.ts';
import { prefersHtml } from '../pages/not-found.ts';
import { errorPayload, sendError } from './errors.ts';

const FRAMEWORK: Record<string, { status: number; message: string }> = {
  FST_ERR_BAD_URL: {
    status: 400,
    message: 'The URL is not valid: a part of its path is not correctly percent-encoded.',
  },
  FST_ERR_MAX_PARAM_LENGTH: { status: 414, message: 'A part of the URL path is too long.' },
};

/** Fastify's frameworkErrors option. */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const known = FRAMEWORK[error.code];
  if (!known) {
    request.log.error({ err: error }, 'request failed before routing');
    return sendError(request, reply, { status: 500 });
  }
  request.log.info({ code: error.code }, 'refused a malformed URL');
  if (prefersHtml(request.headers.accept)) {
    return sendPage(reply, {
      status: known.status,
      title: 'Bad address',
      body: html`<p>${known.message}</p><p><a href="/">Go to the start page</a>.</p>`,
    });
  }
  return sendError(request, reply, { status: known.status, message: known.message });
}

const CLIENT: Record<string, { status: number; message: string }> = {
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, message: 'The request did not arrive in time.' },
  HPE_HEADER_OVERFLOW: { status: 431, message: 'The request headers are too large.' },
};

/** The path of the request line in what Node could not parse, to pick the surface (platform when unknown). */
function requestPath(rawPacket: unknown): string {
  if (!Buffer.isBuffer(rawPacket)) return '/';
  const line = rawPacket.subarray(0, 8192).toString('latin1').split('\r\n', 1)[0] ?? '';
  const target = line.split(' ')[1] ?? '/';
  return target.startsWith('/') ? target : '/';
}

/** Fastify's clientErrorHandler option: answer on the raw socket, then close it. */
export function clientErrorHandler(error: NodeJS.ErrnoException & { rawPacket?: unknown }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const { status, message } = CLIENT[error.code ?? ''] ?? { status: 400, message: 'The request is not valid HTTP.' };
  const { body, headers } = errorPayload(requestPath(error.rawPacket), { status, message });
  const text = JSON.stringify(body);
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\n${extra}Connection: close\r\n\r\n${text}`,
    );
  }
  socket.destroy();
}
