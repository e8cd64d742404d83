export default defineNotification({ email: { to: ['ops@example.com'] } });
