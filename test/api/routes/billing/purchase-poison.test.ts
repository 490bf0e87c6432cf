// A subscriber the in-app purchase provider answers with a product
// identifier PostgreSQL cannot store (a NUL, a lone surrogate, as raw JSON
// escapes): the sync stores it made storable instead of failing with a 500.
import t from 'tap';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember } from '../../../helpers/fixtures.ts';
import { startPurchaseServer, subscriberWith } from '../../../helpers/purchase-server.ts';

const databaseUrl = await createTestDatabase(t);
const provider = await startPurchaseServer(t);
const { app, db } = await buildTestApp(t, databaseUrl, {
  PURCHASE_API_BASE: provider.url,
  PURCHASE_API_KEY: provider.apiKey,
});

t.test('a product identifier holding a NUL and a lone surrogate', async (t) => {
  const admin = await createMember(db);
  const expires = new Date(Date.now() + 30 * 86_400_000);
  provider.setSubscriber(
    admin.tenantId,
    subscriberWith({ entitlement: 'pro', product: 'com.example\u0000.pro.\ud800', expires }),
  );
  const res = await app.inject({
    method: 'POST',
    url: '/api/billing/purchase-sync',
    headers: { authorization: `Bearer ${admin.token}`, 'x-tenant-id': admin.tenantId },
  });
  t.equal(res.statusCode, 200, res.body);
  t.match(res.json(), { plan: 'pro', entitlement: { productId: 'com.example.pro.\ufffd', stored: 'applied' } });
});
