/* commands.h - the entry points of chaosloco's subcommands.
 *
 * chaosloco.c's main() dispatches `chaosloco NAME ARGS...` to NAME_main()
 * with argv[0] = NAME. Each lives in its folder's *_main.c, which only
 * parses the command's flags (common/flags.h), wires the folder's modules
 * together and returns an exit status (common/exitcode.h); only these
 * functions return one. Declared once here so that every definition is
 * checked against the one signature.
 */
#ifndef CX_COMMANDS_H
#define CX_COMMANDS_H

int agent_main(int argc, char **argv);     /* agent/agent_main.c */
int compare_main(int argc, char **argv);   /* harness/compare_main.c */
int dashboard_main(int argc, char **argv); /* dashboards/dashboard_main.c */
int halt_main(int argc, char **argv);      /* harness/halt_main.c */
int learner_main(int argc, char **argv);   /* trainer/learner_main.c */
int report_main(int argc, char **argv);    /* harness/report_main.c */
int run_main(int argc, char **argv);       /* harness/run_main.c */
int secrets_main(int argc, char **argv);   /* harness/secrets_main.c */
int simulate_main(int argc, char **argv);  /* sim/simulate_main.c */
int syncer_main(int argc, char **argv);    /* trainer/syncer/main.c */
int validate_main(int argc, char **argv);  /* harness/validate_main.c */

#endif
