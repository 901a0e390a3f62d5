/** The one log escaping of the library (see contracts): re-exported for the API's files. */
export { errorForLog, escapeForLog, MAX_LOGGED_LENGTH } from '../../contracts';
