// SPDX-License-Identifier: BSD-2-Clause
// A behavioural model of the ECP5 DP16KD block RAM, for simulating the ECP5 variant of
// rtl/common/memory.py (BlockRam) under Icarus and Verilator (tb/test_memory.py). It models the
// subset BlockRam uses: both ports on one clock, equal widths on the two ports (1, 2, 4, 9, 18),
// REGMODE NOREG or OUTREG, chip selects at 0b000, and the INITVAL layout of Yosys's mapping
// (rtl/common/memory.py: dp16kd_initvals). A read at the address port A writes in the same cycle
// returns the inverted old word, standing for the undefined word of the silicon, so a design
// that relied on it fails its bench. Not a model of anything else (no reset values, no
// mixed widths, no WRITEMODE on port B).
`timescale 1ns/1ps
/* verilator lint_off WIDTH */
module DP16KD(
  input DIA17,
  input DIA16,
  input DIA15,
  input DIA14,
  input DIA13,
  input DIA12,
  input DIA11,
  input DIA10,
  input DIA9,
  input DIA8,
  input DIA7,
  input DIA6,
  input DIA5,
  input DIA4,
  input DIA3,
  input DIA2,
  input DIA1,
  input DIA0,
  input ADA13,
  input ADA12,
  input ADA11,
  input ADA10,
  input ADA9,
  input ADA8,
  input ADA7,
  input ADA6,
  input ADA5,
  input ADA4,
  input ADA3,
  input ADA2,
  input ADA1,
  input ADA0,
  input CEA,
  input OCEA,
  input CLKA,
  input WEA,
  input RSTA,
  input CSA2,
  input CSA1,
  input CSA0,
  input DIB17,
  input DIB16,
  input DIB15,
  input DIB14,
  input DIB13,
  input DIB12,
  input DIB11,
  input DIB10,
  input DIB9,
  input DIB8,
  input DIB7,
  input DIB6,
  input DIB5,
  input DIB4,
  input DIB3,
  input DIB2,
  input DIB1,
  input DIB0,
  input ADB13,
  input ADB12,
  input ADB11,
  input ADB10,
  input ADB9,
  input ADB8,
  input ADB7,
  input ADB6,
  input ADB5,
  input ADB4,
  input ADB3,
  input ADB2,
  input ADB1,
  input ADB0,
  input CEB,
  input OCEB,
  input CLKB,
  input WEB,
  input RSTB,
  input CSB2,
  input CSB1,
  input CSB0,
  output DOA17,
  output DOA16,
  output DOA15,
  output DOA14,
  output DOA13,
  output DOA12,
  output DOA11,
  output DOA10,
  output DOA9,
  output DOA8,
  output DOA7,
  output DOA6,
  output DOA5,
  output DOA4,
  output DOA3,
  output DOA2,
  output DOA1,
  output DOA0,
  output DOB17,
  output DOB16,
  output DOB15,
  output DOB14,
  output DOB13,
  output DOB12,
  output DOB11,
  output DOB10,
  output DOB9,
  output DOB8,
  output DOB7,
  output DOB6,
  output DOB5,
  output DOB4,
  output DOB3,
  output DOB2,
  output DOB1,
  output DOB0
);
  parameter DATA_WIDTH_A = 18;
  parameter DATA_WIDTH_B = 18;
  parameter REGMODE_A = "NOREG";
  parameter REGMODE_B = "NOREG";
  parameter RESETMODE = "SYNC";
  parameter ASYNC_RESET_RELEASE = "SYNC";
  parameter CSDECODE_A = "0b000";
  parameter CSDECODE_B = "0b000";
  parameter WRITEMODE_A = "NORMAL";
  parameter WRITEMODE_B = "NORMAL";
  parameter GSR = "ENABLED";
  parameter INITVAL_00 = 320'h0;
  parameter INITVAL_01 = 320'h0;
  parameter INITVAL_02 = 320'h0;
  parameter INITVAL_03 = 320'h0;
  parameter INITVAL_04 = 320'h0;
  parameter INITVAL_05 = 320'h0;
  parameter INITVAL_06 = 320'h0;
  parameter INITVAL_07 = 320'h0;
  parameter INITVAL_08 = 320'h0;
  parameter INITVAL_09 = 320'h0;
  parameter INITVAL_0A = 320'h0;
  parameter INITVAL_0B = 320'h0;
  parameter INITVAL_0C = 320'h0;
  parameter INITVAL_0D = 320'h0;
  parameter INITVAL_0E = 320'h0;
  parameter INITVAL_0F = 320'h0;
  parameter INITVAL_10 = 320'h0;
  parameter INITVAL_11 = 320'h0;
  parameter INITVAL_12 = 320'h0;
  parameter INITVAL_13 = 320'h0;
  parameter INITVAL_14 = 320'h0;
  parameter INITVAL_15 = 320'h0;
  parameter INITVAL_16 = 320'h0;
  parameter INITVAL_17 = 320'h0;
  parameter INITVAL_18 = 320'h0;
  parameter INITVAL_19 = 320'h0;
  parameter INITVAL_1A = 320'h0;
  parameter INITVAL_1B = 320'h0;
  parameter INITVAL_1C = 320'h0;
  parameter INITVAL_1D = 320'h0;
  parameter INITVAL_1E = 320'h0;
  parameter INITVAL_1F = 320'h0;
  parameter INITVAL_20 = 320'h0;
  parameter INITVAL_21 = 320'h0;
  parameter INITVAL_22 = 320'h0;
  parameter INITVAL_23 = 320'h0;
  parameter INITVAL_24 = 320'h0;
  parameter INITVAL_25 = 320'h0;
  parameter INITVAL_26 = 320'h0;
  parameter INITVAL_27 = 320'h0;
  parameter INITVAL_28 = 320'h0;
  parameter INITVAL_29 = 320'h0;
  parameter INITVAL_2A = 320'h0;
  parameter INITVAL_2B = 320'h0;
  parameter INITVAL_2C = 320'h0;
  parameter INITVAL_2D = 320'h0;
  parameter INITVAL_2E = 320'h0;
  parameter INITVAL_2F = 320'h0;
  parameter INITVAL_30 = 320'h0;
  parameter INITVAL_31 = 320'h0;
  parameter INITVAL_32 = 320'h0;
  parameter INITVAL_33 = 320'h0;
  parameter INITVAL_34 = 320'h0;
  parameter INITVAL_35 = 320'h0;
  parameter INITVAL_36 = 320'h0;
  parameter INITVAL_37 = 320'h0;
  parameter INITVAL_38 = 320'h0;
  parameter INITVAL_39 = 320'h0;
  parameter INITVAL_3A = 320'h0;
  parameter INITVAL_3B = 320'h0;
  parameter INITVAL_3C = 320'h0;
  parameter INITVAL_3D = 320'h0;
  parameter INITVAL_3E = 320'h0;
  parameter INITVAL_3F = 320'h0;

  localparam W = DATA_WIDTH_B;
  localparam LOW = W == 18 ? 4 : W == 9 ? 3 : W == 4 ? 2 : W == 2 ? 1 : 0;

  wire [13:0] ada = {ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4, ADA3, ADA2, ADA1, ADA0};
  wire [13:0] adb = {ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4, ADB3, ADB2, ADB1, ADB0};
  wire [17:0] dia = {DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8, DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0};
  wire [13:0] wa = ada >> LOW;
  wire [13:0] ra = adb >> LOW;

  // The array: 1024 rows of 18 bits.
  reg [17:0] rows [0:1023];
  reg [17:0] latch_b, out_b;

  function [319:0] initval(input integer i);
    case (i)
      0: initval = INITVAL_00;
      1: initval = INITVAL_01;
      2: initval = INITVAL_02;
      3: initval = INITVAL_03;
      4: initval = INITVAL_04;
      5: initval = INITVAL_05;
      6: initval = INITVAL_06;
      7: initval = INITVAL_07;
      8: initval = INITVAL_08;
      9: initval = INITVAL_09;
      10: initval = INITVAL_0A;
      11: initval = INITVAL_0B;
      12: initval = INITVAL_0C;
      13: initval = INITVAL_0D;
      14: initval = INITVAL_0E;
      15: initval = INITVAL_0F;
      16: initval = INITVAL_10;
      17: initval = INITVAL_11;
      18: initval = INITVAL_12;
      19: initval = INITVAL_13;
      20: initval = INITVAL_14;
      21: initval = INITVAL_15;
      22: initval = INITVAL_16;
      23: initval = INITVAL_17;
      24: initval = INITVAL_18;
      25: initval = INITVAL_19;
      26: initval = INITVAL_1A;
      27: initval = INITVAL_1B;
      28: initval = INITVAL_1C;
      29: initval = INITVAL_1D;
      30: initval = INITVAL_1E;
      31: initval = INITVAL_1F;
      32: initval = INITVAL_20;
      33: initval = INITVAL_21;
      34: initval = INITVAL_22;
      35: initval = INITVAL_23;
      36: initval = INITVAL_24;
      37: initval = INITVAL_25;
      38: initval = INITVAL_26;
      39: initval = INITVAL_27;
      40: initval = INITVAL_28;
      41: initval = INITVAL_29;
      42: initval = INITVAL_2A;
      43: initval = INITVAL_2B;
      44: initval = INITVAL_2C;
      45: initval = INITVAL_2D;
      46: initval = INITVAL_2E;
      47: initval = INITVAL_2F;
      48: initval = INITVAL_30;
      49: initval = INITVAL_31;
      50: initval = INITVAL_32;
      51: initval = INITVAL_33;
      52: initval = INITVAL_34;
      53: initval = INITVAL_35;
      54: initval = INITVAL_36;
      55: initval = INITVAL_37;
      56: initval = INITVAL_38;
      57: initval = INITVAL_39;
      58: initval = INITVAL_3A;
      59: initval = INITVAL_3B;
      60: initval = INITVAL_3C;
      61: initval = INITVAL_3D;
      62: initval = INITVAL_3E;
      63: initval = INITVAL_3F;
      default: initval = 320'h0;
    endcase
  endfunction

  // Row and bit of bit j of word a (rtl/common/memory.py: dp16kd_initvals).
  function integer row_of(input integer a, input integer j);
    row_of = W >= 9 ? (a * W + j) / 18 : (a * W + j) / 16;
  endfunction
  function integer pos_of(input integer a, input integer j);
    integer p;
    begin
      p = W >= 9 ? (a * W + j) % 18 : (a * W + j) % 16;
      pos_of = (W < 9 && p >= 8) ? p + 1 : p;
    end
  endfunction

  function [17:0] read_word(input integer a);
    integer j;
    begin
      read_word = 18'h0;
      for (j = 0; j < W; j = j + 1)
        read_word[j] = rows[row_of(a, j)][pos_of(a, j)];
    end
  endfunction

  integer i, s, j;
  reg [319:0] v;
  initial begin
    for (i = 0; i < 64; i = i + 1) begin
      v = initval(i);
      for (s = 0; s < 16; s = s + 1)
        for (j = 0; j < 18; j = j + 1)
          rows[i * 16 + s][j] = v[s * 20 + j];
    end
    latch_b = 18'h0;
    out_b = 18'h0;
  end

  integer k;
  always @(posedge CLKA) begin
    if (CEA && WEA) begin
      for (k = 0; k < W; k = k + 1)
        if (W != 18 || (k < 9 ? ADA0 : ADA1))
          rows[row_of(wa, k)][pos_of(wa, k)] <= dia[k];
    end
  end

  always @(posedge CLKB) begin
    if (CEB) begin
      if (CEA && WEA && wa == ra)
        latch_b <= ~read_word(ra);
      else
        latch_b <= read_word(ra);
    end
    if (OCEB)
      out_b <= latch_b;
  end

  wire [17:0] dob = REGMODE_B == "OUTREG" ? out_b : latch_b;
  assign {DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6, DOB5, DOB4, DOB3, DOB2, DOB1, DOB0} = dob;
  assign {DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9, DOA8, DOA7, DOA6, DOA5, DOA4, DOA3, DOA2, DOA1, DOA0} = 18'h0;
endmodule
/* verilator lint_on WIDTH */
