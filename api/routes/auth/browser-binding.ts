// The cookie that binds a redirect flow (altidp login, partner connect) to
// the browser that started it: a random value reused while it lasts, only
// its SHA-256 stored with the flow, so a state carried to another browser
// cannot finish there. Also the one rule for echoing a provider's error code.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { randomToken } from '../../../core/crypto/tokens.ts';

export type BrowserBinding = {
  /** The cookie's value when this browser has a well-formed one. */
  read(request: FastifyRequest): string | undefined;
  /** The browser's value (its own, or a new one) and the cookie set on the reply. */
  bind(request: FastifyRequest, reply: FastifyReply): string;
};

/**
 * SameSite=None where the provider posts back cross-site (form_post); Lax
 * where it comes back with a top-level GET redirect.
 */
export function browserBinding(options: {
  cookie: string;
  path: string;
  ttlS: number;
  sameSite: 'None' | 'Lax';
}): BrowserBinding {
  const read = (request: FastifyRequest) => {
    for (const part of (request.headers.cookie ?? '').split(';')) {
      const [name, value] = part.trim().split('=');
      if (name === options.cookie && value && /^[A-Za-z0-9_-]{43}$/.test(value)) return value;
    }
    return undefined;
  };
  return {
    read,
    bind(request, reply) {
      const value = read(request) ?? randomToken('', 32);
      reply.header(
        'set-cookie',
        `${options.cookie}=${value}; Path=${options.path}; Max-Age=${options.ttlS}; HttpOnly; Secure; SameSite=${options.sameSite}`,
      );
      return value;
    },
  };
}

/** A provider's error code is echoed only when it is a short ASCII word. */
export const providerErrorWord = (value: string, fallback: string) =>
  /^[a-z0-9_]{1,64}$/i.test(value) ? value : fallback;
