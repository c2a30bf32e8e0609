/* compare_run.c: `ptq compare` as library steps (compare.h, "as steps"): one calibration pass,
 * every method's QDQ model evaluated against FP32, the best method, refinement rows,
 * layer-wise errors, the exclusion search and the reports. The CLI prints between steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calib/calib.h"
#include "engine/model.h"
#include "engine/runner.h"
#include "engine/compare.h"
#include "engine/equalize.h"
#include "engine/quantize.h"
#include "engine/refine.h"
#include "io/file.h"
#include "io/onnx.h"
#include "io/report.h"
#include "quant/fp16.h"
#include "quant/opset.h"
#include "runtime/graph_edit.h"

#define N_HISTS 4        /* worst tensors whose histograms the report draws */
#define HIST_BINS 256

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

eng_compare_job eng_compare_job_defaults(void)
{
    eng_compare_job j;
    memset(&j, 0, sizeof j);
    j.eval_cfg = pp_defaults();
    calib_methods_parse("max,percentile:99.99,percentile:99.999,entropy,mse", j.methods, ENG_COMPARE_MAX_METHODS, &j.n_methods);
    cmp_metric_parse("cosine", &j.metric);
    j.layers_method = -1;
    j.qo = quant_defaults();
    j.refine_images = 32;
    j.target = (cmp_target){NAN, NAN, 1.0, NAN, {0}, NAN};
    j.float16 = 1;
    return j;
}

ptq_status eng_compare_calibrate(const eng_compare_job *job, eng_compare_result *res)
{
    ptq_status st = PTQ_OK;
    if (!job->src->o.log.progress && !job->src->o.log.message) job->src->o.log = job->log;
    if (!res->cache && !(res->cache = cmp_cache_create(eng_cache_budget_bytes(&job->src->o)))) FAIL(PTQ_ERR_NOMEM, "out of memory allocating the evaluation cache");
    res->col.pool = cmp_cache_pool(res->cache); /* the pass's arenas serve the evaluations next */
    st = eng_collect(job->g, job->model, job->src, &res->col);
done:
    return st;
}

ptq_status eng_compare_build(const eng_compare_job *job, eng_compare_result *res)
{
    ptq_status st = PTQ_OK;
    if (!res->cache && !(res->cache = cmp_cache_create(eng_cache_budget_bytes(&job->src->o)))) FAIL(PTQ_ERR_NOMEM, "out of memory allocating the evaluation cache");
    res->ev = (cmp_eval){.g = job->g, .model = job->model, .o = job->src->o, .cfg = job->eval_cfg, .labels = job->labels,
                         .nthreads = job->src->o.threads, .cache = res->cache, .metric = job->metric,
                         .float16 = job->float16};
    res->ev.o.images = job->eval_images;
    res->ev.o.limit = job->eval_limit;
    res->ev.o.shuffle = 0;
    res->ev.o.log = job->log;
    res->n_methods = job->n_methods;
    for (int m = 0; m < job->n_methods; m++) calib_method_name(&job->methods[m], res->tags[m], sizeof res->tags[m]);
    for (int m = 0; m < job->n_methods; m++) {
        res->ranges[m] = calloc((size_t)res->col.n + 1, sizeof *res->ranges[m]);
        if (!res->ranges[m]) FAIL(PTQ_ERR_NOMEM, "out of memory allocating the ranges of method %d", m);
    }
    TRY(eng_methods_ranges(&res->col, job->methods, job->n_methods, res->ranges, NULL, NULL));
    for (int m = 0; m < job->n_methods; m++) {
        quant_report rep = {0};
        st = cmp_build_qdq(&res->ev, res->ranges[m], res->col.n, &job->qo, &res->variants[m], &rep);
        if (m == 0)
            for (int i = 0; i < rep.n_unmatched; i++)
                pp_log_message(&job->log, PP_LOG_WARNING, "exclusion '%s' matches no node", rep.unmatched[i]);
        quant_report_free(&rep);
        if (st != PTQ_OK) goto done;
    }
done:
    return st;
}

ptq_status eng_compare_as_is(const eng_compare_job *job, const ptq_graph *base, const char *base_path,
                             eng_compare_result *res)
{
    ptq_status st = PTQ_OK;
    if (!res->cache && !(res->cache = cmp_cache_create(eng_cache_budget_bytes(&job->src->o)))) FAIL(PTQ_ERR_NOMEM, "out of memory allocating the evaluation cache");
    res->ev = (cmp_eval){.g = base ? base : job->g, .model = base ? base_path : job->model, .o = job->src->o,
                         .cfg = job->eval_cfg, .labels = job->labels, .nthreads = job->src->o.threads, .cache = res->cache,
                         .metric = job->metric, .float16 = 0};
    res->ev.o.images = job->eval_images;
    res->ev.o.limit = job->eval_limit;
    res->ev.o.shuffle = 0;
    res->ev.o.log = job->log;
    res->n_methods = 1;
    snprintf(res->tags[0], sizeof res->tags[0], "as-is");
    if (base) TRY(eng_model_load(job->model, &res->variants[0], NULL)); /* a graph of its own: the reference runs base */
    else res->variants[0] = NULL; /* the reference itself: cmp_evaluate runs job->g once for both */
done:
    return st;
}

ptq_status eng_compare_evaluate(const eng_compare_job *job, eng_compare_result *res)
{
    ptq_status st = PTQ_OK;
    /* one method at a time (one QDQ plan in memory); the first pass keeps the decoded
     * images and FP32 outputs in the cache for the others */
    char label[1200];
    const char *label0 = res->ev.o.label;
    res->ev.map_intervals = 1; /* the methods' and refinements' rows; the exclusion search's evaluations take none */
    res->ev.fp32_boxes = &res->text_boxes;
    for (int m = 0; m < res->n_methods; m++) {
        snprintf(label, sizeof label, "evaluating %s (%d/%d)", res->tags[m], m + 1, res->n_methods);
        res->ev.o.label = label;
        st = cmp_evaluate(&res->ev, &res->variants[m], 1, &res->metrics[m]);
        res->ev.o.label = label0;
        if (st != PTQ_OK) goto done;
    }
    for (int m = 0; m < res->n_methods; m++) /* a method that collapses the output on every image */
        if (res->metrics[m].collapsed[0]) {
            const ptq_graph *g = res->ev.g;
            pp_log_message(&job->log, PP_LOG_WARNING, "%s: output '%s' %s on all %d images; FP32's %s", res->tags[m],
                           g->values[g->outputs[0]].name, res->metrics[m].collapsed, res->metrics[m].images,
                           strncmp(res->metrics[m].collapsed, "is ", 3) ? "does not" : "is not");
        }
    const cmp_metrics *m0 = &res->metrics[0];
    res->classifier = !isnan(m0->top1_agree);
    res->labelled = res->classifier && !isnan(m0->top1_acc);
    res->seq = !isnan(m0->seq_top1);
    res->map = !isnan(m0->mask_iou);
    res->boxes = !isnan(m0->box_f1);
    res->metric = job->metric;
    if (!job->metric_given && res->classifier) cmp_metric_parse("top1", &res->metric);
    if (!job->metric_given && res->boxes) cmp_metric_parse("box-f1", &res->metric);
    if (!job->metric_given && !isnan(m0->map)) cmp_metric_parse("map", &res->metric);
    if (!job->metric_given && !isnan(m0->cer)) cmp_metric_parse("text-chars", &res->metric);
    if (!job->metric_given && !isnan(m0->miou)) cmp_metric_parse("miou", &res->metric);
    if (!job->metric_given && !isnan(m0->hmean)) cmp_metric_parse("hmean", &res->metric);
    cmp_metric_name(&res->metric, res->metric_name, sizeof res->metric_name);
    if (isnan(cmp_metric_value(&res->metric, m0)))
        FAIL(PTQ_ERR_ARG, "%s: --metric %s does not apply to its output 0 (%s)", job->model, res->metric_name,
             res->classifier ? "a classifier: top1" : res->seq ? (isnan(m0->seq_chars) ? "a sequence: seq-top1" : (isnan(m0->cer) ? "a sequence: seq-top1, seq-chars, seq-exact" : "a sequence: seq-top1, seq-chars, seq-exact, text-chars, text-lines")) : res->map ? (isnan(m0->hmean) ? "a map: mask-iou:T" : "a map: mask-iou:T, hmean") : res->boxes ? (isnan(m0->map) ? "a detector's boxes: box-f1" : "a detector's boxes: box-f1, map50, map") : "cosine or sqnr only");
    snprintf(res->criterion, sizeof res->criterion, "%s%s",
             !job->metric_given && res->classifier ? (res->labelled ? "top-1 accuracy" : "top-1 agreement") : res->metric_name,
             res->metric.kind == CMP_METRIC_COSINE ? "" : ", then cosine");
    res->best = 0;
    for (int m = 1; m < res->n_methods; m++) {
        double a = cmp_metric_value(&res->metric, &res->metrics[m]), b = cmp_metric_value(&res->metric, &res->metrics[res->best]);
        if (a > b || (a == b && res->metrics[m].cosine > res->metrics[res->best].cosine)) res->best = m;
    }
    res->layers_m = job->layers_method >= 0 && job->layers_method < res->n_methods ? job->layers_method : res->best;
done:
    return st;
}

/* The best method on the equalized model (quantize --equalize): the pairs measured on the
 * calibration images, a calibration pass of the equalized model, its QDQ model evaluated like
 * the methods. */
static ptq_status equalized_row(const eng_compare_job *job, eng_compare_result *res, const char *tag)
{
    ptq_status st = PTQ_OK;
    ptq_graph *g = NULL, *v = NULL;
    eng_equalization eq = {0};
    eng_collector col = {.nthreads = res->col.nthreads, .pool = cmp_cache_pool(res->cache)};
    io_range *ranges = NULL;
    quant_report rep = {0};
    double t0 = now_s();
    TRY(eng_model_load(job->model, &g, NULL));
    pp_dataset_options o = job->src->o;
    o.log = job->log;
    TRY(eng_equalize_images(g, &o, &job->src->cfg, cmp_cache_pool(res->cache), &eq));
    TRY(eng_collect(g, job->model, job->src, &col));
    ranges = calloc((size_t)col.n + 1, sizeof *ranges);
    CHECK_ALLOC(ranges);
    TRY(eng_method_ranges(&col, &job->methods[res->best], ranges, NULL, NULL));
    cmp_eval ev = res->ev;
    ev.eq = &eq;
    TRY(cmp_build_qdq(&ev, ranges, col.n, &job->qo, &v, &rep));
    eng_compare_row *row = &res->rows[res->n_rows];
    char label[200];
    snprintf(row->name, sizeof row->name, "%s + equalization", tag);
    snprintf(label, sizeof label, "evaluating %s", row->name);
    ev.o.label = label;
    TRY(cmp_evaluate(&ev, &v, 1, &row->m));
    row->images = job->src->images;
    row->seconds = now_s() - t0;
    res->n_rows++;
done:
    quant_report_free(&rep);
    free(ranges);
    eng_collector_free(&col);
    eng_equalization_free(&eq);
    ptq_graph_destroy(v);
    ptq_graph_destroy(g);
    return st;
}

/* The best method's QDQ model with each refinement of ptq quantize alone and all together,
 * evaluated like the methods (one row each): what each step contributes; with refine_eq, the
 * best method on the equalized model too. */
ptq_status eng_compare_refinements(const eng_compare_job *job, eng_compare_result *res)
{
    ptq_status st = PTQ_OK;
    ptq_graph *fp = NULL, *v = NULL;
    eng_dataset_source ds = {0};
    int dummy = 0, bc = job->refine_bc, ada = job->refine_ada;
    char tag[64];
    snprintf(tag, sizeof tag, "%s", res->tags[res->best]);
    if (job->refine_eq) TRY(equalized_row(job, res, tag));
    typedef struct {
        const char *name;
        int bc, ada;
    } step;
    step steps[ENG_COMPARE_MAX_ROWS];
    int ns = 0;
    if (!bc && !ada) goto done;
    if (ada) steps[ns++] = (step){"AdaRound", 0, ada};
    if (bc) steps[ns++] = (step){"bias correction", 1, 0};
    if (ada && bc) steps[ns++] = (step){"AdaRound + bias correction", 1, ada};
    TRY(eng_model_load(job->model, &fp, NULL));
    TRY(ptq_graph_constants_to_initializers(fp, &dummy));
    TRY(quant_upgrade_opset(fp, 13, &dummy));
    /* the images of ptq quantize's refinement: the first refine_images of the calibration
     * images (--limit caps both), decoded once for every row while they fit in memory */
    pp_dataset_options o = job->src->o;
    o.limit = o.limit > 0 && o.limit < job->refine_images ? o.limit : job->refine_images;
    o.label = "refining";
    o.log = job->log;
    TRY(eng_fit_batch(fp, job->model, &o));
    eng_source es = eng_source_dataset(&ds, &o, &job->src->cfg);
    for (int k = 0; k < ns; k++) {
        quant_report rep = {0};
        eng_refine_options ro = eng_refine_defaults();
        eng_refine_report rr;
        cmp_eval ev = res->ev;
        eng_compare_row *row = &res->rows[res->n_rows];
        char label[200];
        ro.bias_correction = steps[k].bc;
        ro.adaround_iters = steps[k].ada;
        ro.nthreads = job->src->o.threads;
        ro.seed = job->src->o.seed; /* --seed, as ptq quantize */
        ro.quiet = res->ev.quiet;
        ro.log = job->log;
        cmp_eval ev32 = res->ev; /* refined as ptq quantize refines, then its float part in FP16 */
        ev32.float16 = 0;
        st = cmp_build_qdq(&ev32, res->ranges[res->best], res->col.n, &job->qo, &v, &rep);
        quant_report_free(&rep);
        if (st != PTQ_OK) goto done;
        TRY(eng_refine(v, fp, &es, &ro, &rr));
        if (res->ev.float16) {
            quant_fp16_report fr;
            TRY(quant_fp16_simulate(v, &fr));
        }
        snprintf(row->name, sizeof row->name, "%s + %s", tag, steps[k].name);
        snprintf(label, sizeof label, "evaluating %s", row->name);
        ev.o.label = label;
        TRY(cmp_evaluate(&ev, &v, 1, &row->m));
        row->images = rr.images;
        row->seconds = rr.seconds_total;
        res->n_rows++;
        ptq_graph_destroy(v);
        v = NULL;
    }
done:
    eng_source_dataset_free(&ds);
    ptq_graph_destroy(v);
    ptq_graph_destroy(fp);
    return st;
}

/* Whether the job asks for an exclusion search (a target). */
static int wants_exclusion(const eng_compare_job *job)
{
    return !isnan(job->target.cosine) || !isnan(job->target.top1_drop) || !isnan(job->target.metric) ||
           !isnan(job->target.drop);
}

ptq_status eng_compare_layers(const eng_compare_job *job, eng_compare_result *res)
{
    ptq_status st = PTQ_OK;
    char label[1200];
    /* the layer-wise pass streams the images; without an exclusion search after it nothing
     * reads the evaluation cache again, so its memory goes before the two plans' blocks come */
    if (!wants_exclusion(job)) cmp_cache_drop(res->cache);
    snprintf(label, sizeof label, "layer-wise errors of %s", res->tags[res->layers_m]);
    cmp_eval ev = res->ev;
    ev.o.label = label;
    TRY(cmp_layers(&ev, res->variants[res->layers_m], &res->layers, &res->n_layers));
    res->order = malloc(sizeof *res->order * ((size_t)res->n_layers + 1));
    CHECK_ALLOC(res->order);
    cmp_layers_by_harm(res->layers, res->n_layers, res->order);
done:
    return st;
}

ptq_status eng_compare_exclusion(const eng_compare_job *job, eng_compare_result *res)
{
    ptq_status st = PTQ_OK;
    res->target = job->target;
    res->target.kind = job->metric; /* the search and the target use the job's metric (not top1 chosen for a classifier) */
    res->want_target = wants_exclusion(job);
    if (!res->want_target) return PTQ_OK;
    cmp_eval ev = res->ev;
    ev.map_intervals = 0;
    ev.o.label = "FP32 baseline";
    TRY(cmp_target_baseline(&ev, &res->target));
    if (cmp_meets(&res->target, &res->metrics[res->layers_m])) {
        res->excl.reached = res->metrics[res->layers_m];
        res->target_met = 1;
    } else {
        TRY(cmp_auto_exclude(&ev, res->ranges[res->layers_m], res->col.n, &job->qo, res->variants[res->layers_m], res->layers,
                             res->n_layers, &res->target, &res->excl));
    }
    if (!(res->trt_arg = cmp_layer_precisions(&res->excl))) FAIL(PTQ_ERR_NOMEM, "out of memory allocating the layer precisions");
done:
    return st;
}

/* The mAP fields of a report row from m (fp32: the FP32 model's, which every cmp_metrics carries). */
static void report_map(io_report_truth *r, const cmp_metrics *m, int fp32)
{
    r->map50 = fp32 ? m->fp32_map50 : m->map50;
    r->map = fp32 ? m->fp32_map : m->map;
    r->n_ap = m->n_ap;
    r->ap50 = fp32 ? m->fp32_ap50 : m->ap50;
    r->ap = fp32 ? m->fp32_ap : m->ap;
    r->cer = fp32 ? m->fp32_cer : m->cer;
    r->miou = fp32 ? m->fp32_miou : m->miou;
    r->has_hmean = !isnan(m->fp32_hmean);
    r->hmean = fp32 ? m->fp32_hmean : m->hmean;
    r->det_precision = fp32 ? m->fp32_det_precision : m->det_precision;
    r->det_recall = fp32 ? m->fp32_det_recall : m->det_recall;
    r->has_top1 = !isnan(m->fp32_top1_acc);
    r->top1_acc = fp32 ? m->fp32_top1_acc : m->top1_acc;
    r->n_iou = m->n_iou;
    r->iou = fp32 ? m->fp32_iou : m->iou;
    r->line_acc = fp32 ? m->fp32_line_acc : m->line_acc;
    for (int k = 0; k < 2; k++) {
        r->cer_ci[k] = fp32 ? m->fp32_cer_ci[k] : m->cer_ci[k];
        r->line_acc_ci[k] = fp32 ? m->fp32_line_acc_ci[k] : m->line_acc_ci[k];
        r->cer_delta_ci[k] = fp32 ? (double)NAN : m->cer_delta_ci[k];
        r->line_acc_delta_ci[k] = fp32 ? (double)NAN : m->line_acc_delta_ci[k];
        r->miou_ci[k] = fp32 ? m->fp32_miou_ci[k] : m->miou_ci[k];
        r->miou_delta_ci[k] = fp32 ? (double)NAN : m->miou_delta_ci[k];
        r->hmean_ci[k] = fp32 ? m->fp32_hmean_ci[k] : m->hmean_ci[k];
        r->det_precision_ci[k] = fp32 ? m->fp32_det_precision_ci[k] : m->det_precision_ci[k];
        r->det_recall_ci[k] = fp32 ? m->fp32_det_recall_ci[k] : m->det_recall_ci[k];
        r->hmean_delta_ci[k] = fp32 ? (double)NAN : m->hmean_delta_ci[k];
        r->det_precision_delta_ci[k] = fp32 ? (double)NAN : m->det_precision_delta_ci[k];
        r->det_recall_delta_ci[k] = fp32 ? (double)NAN : m->det_recall_delta_ci[k];
        r->top1_ci[k] = fp32 ? m->fp32_top1_ci[k] : m->top1_ci[k];
        r->top1_delta_ci[k] = fp32 ? (double)NAN : m->top1_delta_ci[k];
        r->map50_ci[k] = fp32 ? m->fp32_map50_ci[k] : m->map50_ci[k];
        r->map_ci[k] = fp32 ? m->fp32_map_ci[k] : m->map_ci[k];
        r->map50_delta_ci[k] = fp32 ? (double)NAN : m->map50_delta_ci[k];
        r->map_delta_ci[k] = fp32 ? (double)NAN : m->map_delta_ci[k];
    }
}

ptq_status eng_compare_write(const eng_compare_job *job, const eng_compare_result *res, const char *excl_out,
                             const char *json, const char *html)
{
    ptq_status st = PTQ_OK;
    io_report_method rm[ENG_COMPARE_MAX_METHODS], rr[ENG_COMPARE_MAX_ROWS];
    io_report_truth mm_map[ENG_COMPARE_MAX_METHODS], rr_map[ENG_COMPARE_MAX_ROWS];
    io_report_layer *rl = NULL;
    io_report_hist rh[N_HISTS];
    double *hist_bins = NULL;
    const char *thr_names[ENG_COMPARE_MAX_METHODS];
    double thr[N_HISTS][ENG_COMPARE_MAX_METHODS];
    int n_hists = 0, n_methods = res->n_methods, n_layers = res->n_layers;
    const eng_collector *col = &res->col;
    io_outset *own = NULL; /* a library caller's files as one set (ptq's CLI has its command's set current) */
    if (!io_outset_current()) TRY(io_outset_begin(&own, NULL));
    if (res->want_target && excl_out) {
        io_atomic_file f;
        TRY(io_atomic_open(&f, excl_out));
        for (int e = 0; e < res->excl.n_nodes; e++) fprintf(f.fp, "%s\n", res->excl.nodes[e]);
        TRY(io_atomic_commit(&f));
    }
    if (!json && !html) goto done;
    for (int m = 0; m < n_methods; m++) {
        const cmp_metrics *mm = &res->metrics[m];
        rm[m] = (io_report_method){res->tags[m], mm->cosine, mm->sqnr_db, mm->max_abs, mm->top1_agree, mm->top1_acc,
                                   mm->seq_top1, mm->seq_chars, mm->seq_exact, mm->mask_iou, mm->mask_threshold,
                                   mm->box_f1};
        report_map(&mm_map[m], mm, 0);
    }
    for (int k = 0; k < res->n_rows; k++) {
        const cmp_metrics *mm = &res->rows[k].m;
        rr[k] = (io_report_method){res->rows[k].name, mm->cosine, mm->sqnr_db, mm->max_abs, mm->top1_agree, mm->top1_acc,
                                   mm->seq_top1, mm->seq_chars, mm->seq_exact, mm->mask_iou, mm->mask_threshold,
                                   mm->box_f1};
        report_map(&rr_map[k], mm, 0);
    }
    io_report_truth fp32;
    report_map(&fp32, &res->metrics[0], 1);
    fp32.n_box_img = res->text_boxes.n_img;
    fp32.box_img = (const char *const *)res->text_boxes.name;
    fp32.box_xy = (const double *const *)res->text_boxes.xy;
    fp32.box_n = res->text_boxes.n;
    int truth = !isnan(res->metrics[0].fp32_map) || !isnan(res->metrics[0].fp32_cer) || !isnan(res->metrics[0].fp32_miou) ||
                !isnan(res->metrics[0].fp32_hmean) ||
                !isnan(res->metrics[0].fp32_top1_acc);
    rl = calloc((size_t)n_layers + 1, sizeof *rl);
    hist_bins = calloc((size_t)N_HISTS * HIST_BINS, sizeof *hist_bins);
    if (!rl || !hist_bins) FAIL(PTQ_ERR_NOMEM, "out of memory allocating the per-layer results");
    for (int i = 0; i < n_layers; i++) {
        const cmp_layer *l = &res->layers[i];
        rl[i] = (io_report_layer){l->tensor, l->node, l->op_type, l->acc_sqnr_db, l->acc_cosine, l->iso_sqnr_db, l->iso_cosine};
    }
    for (int m = 0; m < n_methods; m++) thr_names[m] = res->tags[m];
    /* the worst tensors' histograms of |x| over [0, amax], with every method's amax */
    for (int i = 0; i < n_layers && n_hists < N_HISTS; i++) {
        int t = -1;
        for (int j = 0; j < col->n && t < 0; j++)
            if (!strcmp(col->t[j].name, res->order[i]->tensor)) t = j;
        if (t < 0 || !(col->t[t].stats->amax > 0)) continue;
        double H[CALIB_ANALYSIS_BINS];
        calib_analysis_hist(col->t[t].stats, H);
        double *b = hist_bins + (size_t)n_hists * HIST_BINS;
        for (int k = 0; k < CALIB_ANALYSIS_BINS; k++) b[k * HIST_BINS / CALIB_ANALYSIS_BINS] += H[k];
        for (int m = 0; m < n_methods; m++) thr[n_hists][m] = res->ranges[m][t].amax;
        rh[n_hists] = (io_report_hist){col->t[t].name, col->t[t].stats->amax, HIST_BINS, b, n_methods, thr_names, thr[n_hists]};
        n_hists++;
    }
    io_report_exclusion ex = {0};
    char target_text[160];
    const cmp_target *tg = &res->target;
    if (res->want_target) {
        const cmp_metrics *r = &res->excl.reached;
        double top1 = !isnan(r->top1_acc) ? r->top1_acc : r->top1_agree;
        double reached = tg->fp32_top1 - top1;
        if (!isnan(tg->drop)) {
            snprintf(target_text, sizeof target_text, "%s drop <= %g (FP32 %.6g)", res->metric_name, tg->drop,
                     cmp_target_fp32(tg, r));
            reached = cmp_target_fp32(tg, r) - cmp_metric_value(&res->metric, r);
        } else if (!isnan(tg->metric)) {
            snprintf(target_text, sizeof target_text, "%s >= %g", res->metric_name, tg->metric);
            reached = cmp_metric_value(&res->metric, r);
        } else if (!isnan(tg->cosine)) {
            snprintf(target_text, sizeof target_text, "cosine >= %g", tg->cosine);
            reached = r->cosine;
        } else {
            snprintf(target_text, sizeof target_text, "top-1 drop <= %g", tg->top1_drop);
        }
        ex = (io_report_exclusion){target_text, reached, res->excl.n_nodes, (const char *const *)res->excl.nodes, res->trt_arg};
    }
    io_report r = {.model = job->model, .preset = job->preset, .calib_images = job->src->o.images, .eval_images = job->eval_images,
                   .n_calib = job->src->images, .n_eval = res->metrics[0].images, .criterion = res->criterion,
                   .best_method = res->tags[res->best], .float_part = res->ev.float16 ? "fp16" : "fp32",
                   .as_is = job->as_is, .base = job->as_is && res->ev.g != job->g ? res->ev.model : NULL,
                   .n_methods = n_methods, .methods = rm,
                   .n_refinements = res->n_rows, .refinements = rr,
                   .layers_method = res->tags[res->layers_m], .n_layers = n_layers, .layers = rl, .n_hists = n_hists,
                   .hists = rh, .exclusion = res->want_target ? &ex : NULL, .labels = job->labels,
                   .fp32_map = truth ? &fp32 : NULL, .method_maps = truth ? mm_map : NULL,
                   .refinement_maps = truth ? rr_map : NULL};
    if (json) TRY(io_report_write_json(json, &r));
    if (html) TRY(io_report_write_html(html, &r));
done:
    if (own && st == PTQ_OK) st = io_outset_commit(own, NULL);
    io_outset_free(own);
    free(rl);
    free(hist_bins);
    return st;
}

void eng_compare_result_free(eng_compare_result *res)
{
    for (int m = 0; m < res->n_methods; m++) {
        ptq_graph_destroy(res->variants[m]);
        free(res->ranges[m]);
    }
    cmp_layers_free(res->layers, res->n_layers);
    free(res->order);
    cmp_exclusion_free(&res->excl);
    cmp_cache_destroy(res->cache);
    free(res->trt_arg);
    cmp_text_boxes_free(&res->text_boxes);
    eng_collector_free(&res->col);
    memset(res, 0, sizeof *res);
}
