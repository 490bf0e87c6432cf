// Requests the channels send us, authenticated the channel's own way over the
// exact bytes received (no platform auth: they come from Telegram, Slack or
// the tenant's system). A bad or missing signature is 401 and nothing is
// stored; a good update is stored once by its own id and answered at once
// (the turn is a job). An unknown or disconnected link is 404.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { acceptInboundBatch, LinkGoneError, UPDATE_STATUSES } from '../../../core/channels/inbound.ts';
import { acceptOAuthCode } from '../../../core/channels/linking.ts';
import { findLinkByInbound, openSettings } from '../../../core/channels/store.ts';
import { Keyring } from '../../../core/crypto/keyring.ts';
import { storableJson } from '../../../core/storable.ts';
import { html, sendPage } from '../../pages/layout.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { channelOr404 } from './context.ts';

const MAX_BODY_BYTES = 256 * 1024;

const Received = z
  .object({
    ok: z.literal(true),
    duplicate: z.boolean().describe('This update id was stored before; nothing new happened'),
    status: z
      .enum(UPDATE_STATUSES)
      .describe(
        'turn: answered by a chat turn; refused: answered with the quota reason; stored: kept, channel not enabled; ignored; bound: the link message',
      ),
    jobId: z.uuid().nullable().describe('The chat turn, when there is one'),
  })
  .meta({ id: 'ChannelInboundReceived' });

const inboundRoutes: FastifyPluginAsyncZod = async (app) => {
  const keyring = Keyring.fromConfig(app.config);
  // The signatures cover the exact bytes: keep them, parse here.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'buffer', bodyLimit: MAX_BODY_BYTES },
    (_request, body, done) => done(null, body),
  );

  app.post(
    '/api/channels/:channel/inbound/:linkId',
    {
      schema: {
        operationId: 'receiveChannelInbound',
        tags: ['channels'],
        summary: 'Inbound messages from a channel (signed by the channel; the reply is a job)',
        description: [
          'Called by the channel, not by people; the URL is shown by GET /api/channels/:channel/config (inboundUrl).',
          'telegram: X-Telegram-Bot-Api-Secret-Token (set by the link job with setWebhook).',
          'slack: X-Slack-Signature v0 over `v0:<X-Slack-Request-Timestamp>:<body>` with the signing secret, 5 minutes tolerance; answers url_verification with its challenge.',
          'webhook: X-Webhook-Signature `v1=<hex HMAC-SHA256(signingSecret, "<X-Webhook-Timestamp>.<body>")>`, 5 minutes tolerance; body {id, from:{id,name?}, text?, sessionToken?}.',
        ].join('\n\n'),
        security: [],
        params: z.object({
          channel: z.string().min(1).max(40),
          linkId: z.uuid().describe('From the inboundUrl of the channel'),
        }),
        headers: z.object({
          'x-telegram-bot-api-secret-token': z.string().max(256).optional(),
          'x-slack-signature': z.string().max(200).optional(),
          'x-slack-request-timestamp': z.string().max(20).optional(),
          'x-webhook-signature': z.string().max(200).optional(),
          'x-webhook-timestamp': z.string().max(20).optional(),
        }),
        body: z.unknown().describe("The channel's JSON update, exactly as sent"),
        response: {
          200: z.union([Received, z.object({ challenge: z.string() }).meta({ id: 'SlackUrlVerification' })]),
          400: PlatformError,
          401: PlatformError,
          404: PlatformError,
          413: PlatformError,
          415: PlatformError,
        },
      },
    },
    async (request) => {
      const adapter = channelOr404(request.params.channel);
      const raw = request.body;
      if (!Buffer.isBuffer(raw))
        throw new PlatformHttpError(415, 'unsupported_media_type', 'Send the update as application/json.');
      const link = await findLinkByInbound(app.db, adapter.id, request.params.linkId);
      if (!link) throw new PlatformHttpError(404, 'not_found', 'No such channel link (disconnected?).');
      if (!adapter.verify(openSettings(keyring, link), { headers: request.headers, rawBody: raw, nowMs: Date.now() })) {
        request.log.warn({ channel: adapter.id, linkId: link.id }, 'channel inbound refused: bad signature');
        throw new PlatformHttpError(
          401,
          'invalid_signature',
          `The request is not signed the ${adapter.id} way with this channel's secret (or it is too old).`,
        );
      }
      let body: unknown;
      try {
        // Read past the input guard (the signature covers the raw bytes): a NUL
        // or a lone surrogate is mended here, not refused, so the channel does
        // not deliver the same message again and again.
        body = storableJson(JSON.parse(raw.toString('utf8')));
      } catch {
        throw new PlatformHttpError(400, 'invalid_request', 'The body is not JSON.');
      }
      const parsed = adapter.parse(body);
      if (!parsed) throw new PlatformHttpError(400, 'invalid_request', `The body is not a ${adapter.id} update.`);
      if (parsed.kind === 'challenge') return parsed.body as { challenge: string };
      // Batched with the other requests in flight (a few statements per batch, as chat sends).
      const accepted = (await app.jobs.submitBatched(acceptInboundBatch, { adapter, linkId: link.id, update: parsed }))
        .value;
      if (accepted instanceof LinkGoneError) throw new PlatformHttpError(404, 'not_found', accepted.message);
      request.log.info(
        { channel: adapter.id, linkId: link.id, status: accepted.status, duplicate: accepted.duplicate },
        'channel update received',
      );
      return { ok: true as const, duplicate: accepted.duplicate, status: accepted.status, jobId: accepted.jobId };
    },
  );

  // Slack's OAuth v2 redirect: a person's browser lands here after installing the app.
  app.get(
    '/api/channels/slack/oauth/callback',
    {
      schema: {
        hide: true,
        querystring: z.object({
          code: z.string().max(500).optional(),
          state: z.string().max(200).optional(),
          error: z.string().max(200).optional(),
        }),
      },
    },
    async (request, reply) => {
      const { code, state, error } = request.query;
      const ok = !error && !!code && !!state && (await acceptOAuthCode(app.db, keyring, 'slack', state, code));
      const message = ok
        ? 'Slack is being connected to your workspace. You can close this page.'
        : error
          ? `Slack did not install the app (${error}). Start the link again.`
          : 'This install link is not valid any more. Start the link again.';
      return sendPage(reply, { status: ok ? 200 : 400, title: 'Slack', body: html`<p>${message}</p>` });
    },
  );
};

export default inboundRoutes;
