import { definePrompt } from '@standardagents/spec';
import { COMPANY } from '../../shared/constants.js';
import { promptDefaults } from '../lib/defaults.js';

// The helper's override is wrong: `includeChat` takes a boolean.
export default definePrompt({
  name: 'billing',
  toolDescription: `Bills ${COMPANY}'s customers.`,
  prompt: 'You answer billing questions.',
  ...promptDefaults({ includeChat: 'always' }),
});
