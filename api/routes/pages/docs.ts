// GET /docs: the API reference, Swagger UI over our own OpenAPI document.
// Everything is served from the @fastify/swagger-ui package in
// node_modules (no CDN, works offline): /docs (the page), /docs/static/*
// (its scripts, styles and icons), /docs/json and /docs/yaml (the document
// it loads, the same as /openapi.json). /docs/llms.txt and the other
// contract documents stay where they are: the package claims only these
// paths. The page has no inline script, so the CSP allows scripts and
// styles from this origin only (and one inline style by its hash); the UI's
// "try it out" may call this deployment's own origins.
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyPluginAsync } from 'fastify';

export const DOCS_PREFIX = '/docs';

const originOf = (url: string) => new URL(url).origin;

/** sha256 of `.logo_small_svg__cls-2{fill:#fff}.logo_small_svg__cls-3{fill:#85ea2d}` (swagger-ui-standalone-preset.js). */
const LOGO_STYLE_HASH = 'sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w=';

export function docsCsp(baseUrl: string, authUrl: string): string {
  const apis = [...new Set([originOf(baseUrl), originOf(authUrl)])].join(' ');
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    // The one inline <style>: the top bar's SVG logo, which the standalone
    // preset draws (the package's initializer then swaps it for an image).
    // Allowed by its hash for <style> elements only; style attributes stay 'self'.
    `style-src-elem 'self' '${LOGO_STYLE_HASH}'`,
    // The package's logo is inlined as a data: URL by its initializer.
    "img-src 'self' data:",
    "font-src 'self'",
    `connect-src 'self' ${apis}`,
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

const VIEWPORT = '<meta name="viewport" content="width=device-width,initial-scale=1">';

const docsRoutes: FastifyPluginAsync = async (app) => {
  const { baseUrl, authUrl } = app.config;
  // Encapsulated: these hooks touch only the UI's own routes.
  app.addHook('onSend', async (_request, reply, payload) => {
    reply
      .header('x-content-type-options', 'nosniff')
      .header('x-frame-options', 'DENY')
      .header('referrer-policy', 'no-referrer');
    // The package's page has no viewport meta; phones need one.
    const type = String(reply.getHeader('content-type') ?? '');
    if (type.startsWith('text/html') && typeof payload === 'string' && !payload.includes('name="viewport"')) {
      return payload.replace(/<meta charset="UTF-8">/i, (m) => `${m}\n      ${VIEWPORT}`);
    }
    return payload;
  });
  await app.register(swaggerUi, {
    routePrefix: DOCS_PREFIX,
    staticCSP: docsCsp(baseUrl, authUrl),
    theme: { title: 'Agent platform API reference' },
    uiConfig: { deepLinking: true, docExpansion: 'list', defaultModelsExpandDepth: 0 },
  });
};

export default docsRoutes;
