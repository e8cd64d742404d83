import { defineNotification } from '@standardagents/spec';
export default defineNotification({ email: { to: ['ops@example.com'] } });
