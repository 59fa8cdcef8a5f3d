// The admin routes of ctl login's device flow (device.ts): start one, and
// poll it. Public, as GET /api/v1/login is: ctl has no token yet. Starting
// one is bounded, in all and per address (MAX_PENDING_DEVICE_SIGN_INS and
// its per-address sibling); polling needs the handle, a random secret only
// the starter holds.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ZodTypeProvider } from '../../http/index.js';
import type { DevicePoll, DeviceSignIns, DeviceStart } from './device.js';

const PUBLIC = { config: { access: 'public' } } as const;

export function registerDeviceLogin(fastify: FastifyInstance, device: DeviceSignIns): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  app.post('/api/v1/login/device', PUBLIC, async (request, reply): Promise<DeviceStart> => {
    void reply.code(201).header('cache-control', 'no-store');
    return device.start(request.ip);
  });
  app.post(
    '/api/v1/login/device/:handle',
    { ...PUBLIC, schema: { params: z.object({ handle: z.string().min(1).max(100) }) } },
    async (request, reply): Promise<DevicePoll> => {
      void reply.header('cache-control', 'no-store');
      return device.poll(request.params.handle);
    },
  );
}
