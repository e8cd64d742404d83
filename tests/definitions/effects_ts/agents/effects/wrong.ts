import { defineEffect } from '@standardagents/spec';
export default defineEffect(42, async () => {});
