export const GREETING = 'Hello';
