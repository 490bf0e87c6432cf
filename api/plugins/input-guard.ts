// One check for every route, before its own schema runs: no string in the
// body, query or path may hold a NUL character or an unpaired UTF-16
// surrogate (PostgreSQL stores neither in text or jsonb), and JSON may nest
// at most MAX_DEPTH levels (deeper values would exhaust recursive code such as
// canonical JSON or a refine's JSON.stringify). Such input is a 400 in the
// surface's own shape, naming the field, instead of a 500 from the database.
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import fp from 'fastify-plugin';

export const MAX_DEPTH = 64;

// A lone high surrogate (not followed by a low one) or a lone low one.
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

type Problem = { path: string; message: string };

function stringProblem(value: string): string | null {
  if (value.includes('\u0000')) return 'contains a NUL character';
  if (UNPAIRED_SURROGATE.test(value)) return 'contains an unpaired UTF-16 surrogate (not valid Unicode)';
  return null;
}

/** Walks a parsed value without recursion; the first problem found, with its path. */
export function findInputProblem(root: unknown): Problem | null {
  const stack: Array<{ value: unknown; path: string[]; depth: number }> = [{ value: root, path: [], depth: 0 }];
  while (stack.length > 0) {
    const { value, path, depth } = stack.pop()!;
    if (typeof value === 'string') {
      const problem = stringProblem(value);
      if (problem) return { path: path.join('/'), message: problem };
      continue;
    }
    if (value === null || typeof value !== 'object' || value instanceof Uint8Array) continue;
    if (depth >= MAX_DEPTH) return { path: path.join('/'), message: `nests deeper than ${MAX_DEPTH} levels` };
    for (const [key, child] of Object.entries(value)) {
      const keyProblem = stringProblem(key);
      if (keyProblem) return { path: path.join('/'), message: `has a property name that ${keyProblem}` };
      stack.push({ value: child, path: [...path, key], depth: depth + 1 });
    }
  }
  return null;
}

/** Shaped like a schema validation error, so the error handler answers it like one (400 with details). */
function refusal(context: 'body' | 'querystring' | 'params', problem: Problem): Error {
  return Object.assign(new Error(`Invalid request: ${problem.message}`), {
    statusCode: 400,
    validationContext: context,
    validation: [
      {
        instancePath: problem.path ? `/${problem.path}` : '',
        message: problem.message,
        keyword: 'input',
        params: {},
        schemaPath: '',
      },
    ],
  });
}

async function inputGuard(app: FastifyInstance) {
  // A callback, not async: every request runs it (see the onSend hook in app.ts).
  app.addHook('preValidation', (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    for (const context of ['params', 'querystring', 'body'] as const) {
      const value = context === 'params' ? request.params : context === 'querystring' ? request.query : request.body;
      const problem = findInputProblem(value);
      if (problem) return done(refusal(context, problem));
    }
    done();
  });
}

export default fp(inputGuard, { name: 'input-guard' });
