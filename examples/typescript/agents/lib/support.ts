// Shared by the definitions: plain constants, imported as any TypeScript module would be.
export const TONE: string = 'Be brief and kind.';

export const CARRIERS = ['ups', 'dhl', 'post'] as const;

export const SESSION_DEFAULTS = {
  maxSessionTurns: 6,
};
