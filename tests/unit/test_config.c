/* test_config.c - training config: defaults < file < flags, strict errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "trainer/config.h"
#include "numerics/model.h"

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/cx_test_config_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

Test(config, defaults_are_valid)
{
    config c;
    char err[CX_ERRLEN];
    config_defaults(&c);
    cr_assert_eq(config_validate(&c, err, sizeof err), 0, "%s", err);
    cr_assert_eq(c.mode, CONFIG_MODE_DECOUPLED);
    cr_assert_eq(c.model, CONFIG_MODEL_GPT);
    cr_assert_str_eq(c.data, "fortunes");
    cr_assert_eq(c.context, 64);
    cr_assert_eq(c.embed, 128);
    cr_assert_float_eq(c.outer_lr, 0.7, 1e-12);
    cr_assert_float_eq(c.outer_momentum, 0.5, 1e-12, "decoupled's outer momentum");
}

Test(config, kind_defaults_follow_mode_and_model_and_flags_still_win)
{
    config c;
    char err[CX_ERRLEN];
    config_defaults(&c);
    config_kind_defaults(&c, CONFIG_MODE_DDP, CONFIG_MODEL_MLP);
    cr_assert_eq(config_validate(&c, err, sizeof err), 0, "%s", err);
    cr_assert_eq(c.mode, CONFIG_MODE_DDP);
    cr_assert_eq(c.model, CONFIG_MODEL_MLP);
    cr_assert_float_eq(c.outer_momentum, 0.9, 1e-12);
    cr_assert_eq(c.context, 8);
    cr_assert_eq(c.embed, 16);
    cr_assert_eq(c.batch, 16);
    cr_assert_eq(c.eval_every_ms, 0);
    cr_assert_eq(c.warmup, 20);
    cr_assert_str_eq(c.data, "fortunes", "the corpus does not follow the model");
    cr_assert_eq(config_set_flag(&c, "--context", "12", err, sizeof err), 0, "%s", err);
    cr_assert_eq(c.context, 12);
    config_kind_defaults(&c, CONFIG_MODE_DECOUPLED, CONFIG_MODEL_GPT);
    cr_assert_eq(c.context, 64);
    cr_assert_eq(c.batch, 8);
    cr_assert_eq(c.eval_tokens, 512);
    cr_assert_eq(c.warmup, 60, "the gpt warms up longer (its spike at 20: docs/training.md)");
    cr_assert_eq(config_validate(&c, err, sizeof err), 0, "%s", err);
}

Test(config, flags_override_file_which_overrides_defaults)
{
    config c;
    char err[CX_ERRLEN];
    char *path = write_tmp("{\"mode\": \"diloco\", \"H\": 50, \"outer_lr\": 0.5, \"data\": \"x.txt\"}");
    config_defaults(&c);
    cr_assert_eq(config_load_file(&c, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(c.mode, CONFIG_MODE_DILOCO);
    cr_assert_eq(c.H, 50);
    cr_assert_str_eq(c.data, "x.txt");
    cr_assert_eq(c.batch, 8, "untouched keys keep their default");
    cr_assert_eq(config_set_flag(&c, "--H", "12", err, sizeof err), 0, "%s", err);
    cr_assert_eq(config_set_flag(&c, "--outer-lr", "0.25", err, sizeof err), 0, "%s", err);
    cr_assert_eq(c.H, 12);
    cr_assert_float_eq(c.outer_lr, 0.25, 1e-12);
    cr_assert_eq(c.mode, CONFIG_MODE_DILOCO);
    unlink(path);
    free(path);
}

Test(config, unknown_key_is_an_error_naming_it)
{
    config c, before;
    char err[CX_ERRLEN] = "";
    char *path = write_tmp("{\"H\": 10, \"quorom\": 2}");
    config_defaults(&c);
    before = c;
    cr_assert_eq(config_load_file(&c, path, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "quorom") != NULL, "message names the key: %s", err);
    cr_assert_eq(memcmp(&c, &before, sizeof c), 0, "a bad file changes nothing");
    unlink(path);
    free(path);
}

Test(config, wrong_types_and_ranges_are_errors)
{
    config c;
    char err[CX_ERRLEN] = "";
    json_t *j;
    config_defaults(&c);
    j = json_pack("{s:s}", "H", "24");
    cr_assert_eq(config_from_json(&c, j, "t", err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "'H'") != NULL, "%s", err);
    json_decref(j);
    j = json_pack("{s:i}", "learners", 0);
    cr_assert_eq(config_from_json(&c, j, "t", err, sizeof err), CX_EINVAL);
    json_decref(j);
    j = json_pack("{s:s}", "mode", "sync");
    cr_assert_eq(config_from_json(&c, j, "t", err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "ddp") != NULL, "lists the valid modes: %s", err);
    json_decref(j);
    cr_assert_eq(config_set_flag(&c, "--steps", "abc", err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "--steps") != NULL, "%s", err);
    cr_assert_eq(config_set_flag(&c, "--outer-momentum", "1.5", err, sizeof err), CX_EINVAL);
    cr_assert_eq(config_set_flag(&c, "--encoding", "int3", err, sizeof err), CX_EINVAL);
    cr_assert_eq(config_set_flag(&c, "--no-such-flag", "1", err, sizeof err), CX_ENOTFOUND);
}

Test(config, json_round_trip)
{
    config a, b;
    char err[CX_ERRLEN];
    config_defaults(&a);
    config_set_flag(&a, "--mode", "ddp-elastic", err, sizeof err);
    config_set_flag(&a, "--encoding", "int4", err, sizeof err);
    config_set_flag(&a, "--grace-gamma", "0.3", err, sizeof err);
    config_set_flag(&a, "--data", "/tmp/corpus.txt", err, sizeof err);
    json_t *j = config_to_json(&a);
    config_defaults(&b);
    cr_assert_eq(config_from_json(&b, j, "t", err, sizeof err), 0, "%s", err);
    json_decref(j);
    cr_assert_eq(memcmp(&a, &b, sizeof a), 0);
}

Test(config, cross_field_validation)
{
    config c;
    char err[CX_ERRLEN] = "";
    config_defaults(&c);
    c.quorum = 3;
    c.learners = 2;
    cr_assert_eq(config_validate(&c, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "--quorum") != NULL, "%s", err);
    config_defaults(&c);
    c.H = 10;
    c.fragments = 4;
    cr_assert_eq(config_validate(&c, err, sizeof err), CX_EINVAL);
    config_defaults(&c);
    c.mode = CONFIG_MODE_DDP_ELASTIC;
    /* 0: the deadline is derived from the measured compute time */
    cr_assert_eq(config_validate(&c, err, sizeof err), 0, "%s", err);
    c.elastic_deadline_ms = 100;
    cr_assert_eq(config_validate(&c, err, sizeof err), 0, "%s", err);
}

Test(config, learner_overrides)
{
    cr_assert_str_eq(config_learner_override("--batch"), "batch");
    cr_assert_not_null(config_learner_override("--steps"));
    cr_assert_not_null(config_learner_override("--slowdown"));
    cr_assert_not_null(config_learner_override("--data"));
    cr_assert_not_null(config_learner_override("--encoding"));
    cr_assert_str_eq(config_learner_override("--upstream-ef"), "upstream_ef");
    cr_assert_null(config_learner_override("--outer-lr"));
    cr_assert_null(config_learner_override("--mode"));
}

/* --threads reaches the model: config_model_config passes it, so the
 * learner's and the syncer's gpt models start their pool from the flag. */
Test(config, threads_flag_reaches_the_model_config)
{
    config c;
    char err[CX_ERRLEN];
    config_defaults(&c);
    model_config mc;
    config_model_config(&c, c.batch, &mc);
    cr_assert_eq(mc.threads, 1, "default: one thread");
    cr_assert_eq(config_set_flag(&c, "--threads", "3", err, sizeof err), 0, "%s", err);
    config_model_config(&c, c.batch, &mc);
    cr_assert_eq(mc.threads, 3);
    cr_assert_neq(config_set_flag(&c, "--threads", "65", err, sizeof err), 0, "65 threads accepted");
    cr_assert(strstr(err, "threads"), "%s", err);
}

Test(config, checkpoint_min_ms_defaults_to_2000_and_is_bounded)
{
    config c;
    char err[CX_ERRLEN] = "";
    config_defaults(&c);
    cr_assert_eq(c.checkpoint_min_ms, 2000);
    cr_assert_eq(config_set_flag(&c, "--checkpoint-min-ms", "0", err, sizeof err), 0, "%s", err);
    cr_assert_eq(c.checkpoint_min_ms, 0);
    cr_assert_eq(config_set_flag(&c, "--checkpoint-min-ms", "-1", err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "--checkpoint-min-ms") != NULL, "names the flag: %s", err);
    json_t *j = json_pack("{s:i}", "checkpoint_min_ms", 250);
    cr_assert_eq(config_from_json(&c, j, "t", err, sizeof err), 0, "%s", err);
    cr_assert_eq(c.checkpoint_min_ms, 250);
    json_decref(j);
    j = json_pack("{s:s}", "checkpoint_min_ms", "2s");
    cr_assert_eq(config_from_json(&c, j, "t", err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "checkpoint_min_ms") != NULL, "names the key: %s", err);
    json_decref(j);
}

/* q2 and upstream_ef (issue 12): q2 is an encoding name; upstream error
 * feedback defaults to on, takes on/off from a flag or JSON, nothing else. */
Test(config, q2_and_upstream_ef)
{
    config c;
    char err[CX_ERRLEN] = "";
    config_defaults(&c);
    cr_assert_eq(c.upstream_ef, 1, "upstream error feedback is on by default");
    cr_assert_eq(config_set_flag(&c, "--encoding", "q2", err, sizeof err), 0, "%s", err);
    cr_assert_eq(c.encoding, CONFIG_ENC_Q2);
    cr_assert_str_eq(config_encoding_name(CONFIG_ENC_Q2), "q2");
    int64_t e = -1;
    cr_assert_eq(config_parse_encoding("q2", &e), 0);
    cr_assert_eq(e, CONFIG_ENC_Q2);
    cr_assert_eq(config_set_flag(&c, "--upstream-ef", "off", err, sizeof err), 0, "%s", err);
    cr_assert_eq(c.upstream_ef, 0);
    cr_assert_eq(config_set_flag(&c, "--upstream-ef", "yes", err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "upstream") != NULL && strstr(err, "yes") != NULL, "names flag and value: %s", err);
    json_t *j = json_pack("{s:s}", "upstream_ef", "on");
    cr_assert_eq(config_from_json(&c, j, "t", err, sizeof err), 0, "%s", err);
    cr_assert_eq(c.upstream_ef, 1);
    json_decref(j);
    j = json_pack("{s:i}", "upstream_ef", 1);
    cr_assert_eq(config_from_json(&c, j, "t", err, sizeof err), CX_EINVAL, "a number is not on/off");
    cr_assert(strstr(err, "upstream_ef") != NULL, "%s", err);
    json_decref(j);
    char line[4096];
    config_format(&c, line, sizeof line);
    cr_assert(strstr(line, "upstream_ef=on") != NULL && strstr(line, "encoding=q2") != NULL, "%s", line);
}

/* partial_scale (issue 12's k/M revisit): on by default, on/off from a flag
 * or JSON, syncer-only (a learner cannot change how rounds are applied). */
Test(config, partial_scale)
{
    config c;
    char err[CX_ERRLEN] = "";
    config_defaults(&c);
    cr_assert_eq(c.partial_scale, 1, "k/M scaling is on by default");
    cr_assert_eq(config_set_flag(&c, "--partial-scale", "off", err, sizeof err), 0, "%s", err);
    cr_assert_eq(c.partial_scale, 0);
    cr_assert_eq(config_set_flag(&c, "--partial-scale", "half", err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "partial") != NULL && strstr(err, "half") != NULL, "names flag and value: %s", err);
    cr_assert_null(config_learner_override("--partial-scale"));
    json_t *j = json_pack("{s:s}", "partial_scale", "on");
    cr_assert_eq(config_from_json(&c, j, "t", err, sizeof err), 0, "%s", err);
    cr_assert_eq(c.partial_scale, 1);
    json_decref(j);
    char line[4096];
    config_format(&c, line, sizeof line);
    cr_assert(strstr(line, "partial_scale=on") != NULL, "%s", line);
}
