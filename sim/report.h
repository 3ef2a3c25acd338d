/* report.h - runs a grid of simulations (rows: dp, elastic, decoupled M=..;
 * columns: chip counts) and prints it in the layout of the paper's Table 1
 * with the paper's figures beside ours, or as CSV / JSON; and the
 * sensitivity sweep (each unknown parameter halved and doubled).
 * The numbers come from sim.h; this file only arranges and prints them.
 */
#ifndef CX_SIM_REPORT_H
#define CX_SIM_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "sim/sim.h"

#define SIM_GRID_MAX 16

typedef enum sim_format { SIM_FMT_TABLE, SIM_FMT_CSV, SIM_FMT_JSON } sim_format;

typedef struct sim_grid {
    int64_t chips[SIM_GRID_MAX]; /* columns, chips */
    int nchips;                  /* count */
    int mode_on[3];              /* indexed by sim_mode: 1 = row(s) wanted */
    int learners[SIM_GRID_MAX];  /* decoupled rows, M each */
    int nlearners;               /* count */
    int trials;                  /* per cell */
    uint64_t seed;               /* base seed */
    int progress;                /* 1 = show progress on stderr (a TTY) */
} sim_grid;

/* Run the grid with p and print it to f. 0, or the first simulation error
 * (CX_EINVAL naming the bad value), or CX_EIO / CX_ENOMEM. */
int sim_report_table(FILE *f, const sim_params *p, const sim_grid *g, sim_format fmt, char *err,
                     size_t errlen);

/* The sensitivity sweep: the grid under the baseline p and under each
 * unknown halved and doubled (and the alternative distributions and stop
 * policy), printed per row with one line per variant. */
int sim_report_sweep(FILE *f, const sim_params *p, const sim_grid *g, sim_format fmt, char *err,
                     size_t errlen);

/* "150k", "1.2M", "512": a chip count as the paper writes it (buf >= 16). */
void sim_chips_label(char *buf, size_t len, int64_t chips);

#endif
