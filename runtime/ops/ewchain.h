/* ewchain.h: the program of ptq_op_ew_chain (ewchain.c), written by runtime/plan_fuse.c. One
 * instruction is EW_FIELDS int32: op, destination (unused: instruction i writes register i + 1),
 * operand a's register (0: the input, i: instruction i's result, -1: a constant), operand b's,
 * a's constant input index, b's, round to FP16 (0/1), Clip's low and high bounds (float bits). */
#ifndef PTQ_RUNTIME_OPS_EWCHAIN_H
#define PTQ_RUNTIME_OPS_EWCHAIN_H

enum { EW_ADD = 1, EW_SUB, EW_MUL, EW_DIV, EW_CLIP };
enum { EW_FIELDS = 9, EW_MAX_INSTR = 15 };

#endif
