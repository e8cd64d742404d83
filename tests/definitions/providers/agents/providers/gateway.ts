import { defineProvider } from '@standardagents/spec';
export default defineProvider({
  name: 'gateway',
  type: 'anthropic',
  baseUrl: 'https://gateway.example.com/anthropic',
  apiKeyEnv: 'GATEWAY_KEY',
  headers: { 'anthropic-beta': 'interleaved-thinking-2025-05-14' },
});
